"""Device-to-cloud request budget: serial upload, round trip, processing and download.

The book's edge-cloud method (case `raw-retouching`): a request whose steps depend on each
other costs the *sum* of its terms, so the first question is which term dominates; a what-if
replaces some inputs and reports the time saved.
"""
from __future__ import annotations

import numpy as np
from pydantic import Field

from calculators.core import (
    CalcInputError, CalcRequest, Lookup, NonNegFloat, NonNegFloatSweep, PosFloat, PosFloatSweep,
    PosInt, Result, broadcast, fmt_s, num, out,
)
from calculators.base import Calculator, Chart

TERMS = ("upload", "rtt", "processing", "download", "codec")


class Compression(CalcRequest):
    """Compress the upload by `ratio` at the cost of `codec_s` seconds of encode + decode."""

    ratio: PosFloat = Field(description="Upload size divided by this (2 = 2:1). Must be > 0.", examples=[2])
    codec_s: NonNegFloat = Field(0.0, description="Extra seconds spent encoding and decoding, on the critical path.")


class EdgeWhatIf(CalcRequest):
    """A partial request: every field given replaces the base request's value (null keeps the base value,
    except `compression: null`, which removes the base's compression)."""

    label: str | None = Field(None, max_length=200, description="Name shown for this variant.")
    upload_bytes: NonNegFloat | None = None
    download_bytes: NonNegFloat | None = None
    uplink_bits_per_s: PosFloat | None = None
    downlink_bits_per_s: PosFloat | None = None
    rtt_s: NonNegFloat | None = None
    processing_s: NonNegFloat | None = None
    compression: Compression | None = None
    rounds: PosInt | None = None


class EdgeTransferRequest(CalcRequest):
    """One device↔cloud request (or an agent loop of `rounds` of them)."""

    upload_bytes: NonNegFloatSweep = Field(description="Bytes sent device → cloud per round (decimal: 30 MB = 30e6). Sweepable.", examples=[30e6])
    download_bytes: NonNegFloatSweep = Field(0.0, description="Bytes sent back per round. Sweepable.", examples=[5e6])
    uplink_bits_per_s: PosFloatSweep = Field(description="Uplink rate in bit/s (20 Mbit/s = 20e6). Sweepable.", examples=[20e6])
    downlink_bits_per_s: PosFloatSweep = Field(description="Downlink rate in bit/s. Sweepable.", examples=[100e6])
    rtt_s: NonNegFloatSweep = Field(0.0, description="Round-trip time in seconds, paid once per round. Sweepable.", examples=[0.1])
    processing_s: NonNegFloatSweep = Field(0.0, description="Cloud (or any other serial) work per round, seconds. Sweepable.", examples=[0.3])
    compression: Compression | None = Field(None, description="Optional upload compression.")
    rounds: PosInt = Field(1, description="Serially dependent rounds (agent loop steps).")
    what_if: list[EdgeWhatIf] = Field(default_factory=list, max_length=50, description="Variants to compare with the base.")


def _terms(upload_bytes, download_bytes, up_bps, down_bps, rtt_s, processing_s, compression) -> dict:
    ratio = compression.ratio if compression else 1.0
    codec = compression.codec_s if compression else 0.0
    upload = upload_bytes / ratio * 8.0 / up_bps
    download = download_bytes * 8.0 / down_bps
    return {"upload": upload, "rtt": rtt_s + 0.0 * upload, "processing": processing_s + 0.0 * upload,
            "download": download, "codec": codec + 0.0 * upload}


def compute(req: EdgeTransferRequest, lookup: Lookup) -> Result:
    x = broadcast({"upload_bytes": req.upload_bytes, "download_bytes": req.download_bytes,
                   "uplink_bits_per_s": req.uplink_bits_per_s, "downlink_bits_per_s": req.downlink_bits_per_s,
                   "rtt_s": req.rtt_s, "processing_s": req.processing_s})
    res = Result(inputs=req.model_dump(mode="json"), outputs={})
    terms = _terms(x["upload_bytes"], x["download_bytes"], x["uplink_bits_per_s"], x["downlink_bits_per_s"],
                   x["rtt_s"], x["processing_s"], req.compression)
    c = req.compression
    up0 = float(np.ravel(x["upload_bytes"])[0]); upbps0 = float(np.ravel(x["uplink_bits_per_s"])[0])
    if c:
        res.step("upload", "t_up = (bytes_up / ratio) × 8 / B_up", f"({num(up0)} B / {num(c.ratio)}) × 8 / {num(upbps0)} bit/s",
                 terms["upload"], "s")
        res.step("codec", "t_codec (encode + decode, serial)", f"{num(c.codec_s)} s", terms["codec"], "s")
    else:
        res.step("upload", "t_up = bytes_up × 8 / B_up", f"{num(up0)} B × 8 / {num(upbps0)} bit/s", terms["upload"], "s")
    down0 = float(np.ravel(x["download_bytes"])[0]); downbps0 = float(np.ravel(x["downlink_bits_per_s"])[0])
    res.step("download", "t_down = bytes_down × 8 / B_down", f"{num(down0)} B × 8 / {num(downbps0)} bit/s", terms["download"], "s")
    per_round = terms["upload"] + terms["rtt"] + terms["processing"] + terms["download"] + terms["codec"]
    res.step("one round", "t_round = t_up + RTT + t_proc + t_down + t_codec",
             " + ".join(fmt_s(float(np.ravel(terms[t])[0])) for t in TERMS), per_round, "s")
    total = per_round * req.rounds
    if req.rounds > 1:
        res.step("all rounds", "T = rounds × t_round (each round waits for the previous one)",
                 f"{req.rounds} × {fmt_s(float(np.ravel(per_round)[0]))}", total, "s")
    bdp = x["uplink_bits_per_s"] * x["rtt_s"] / 8.0
    res.step("bandwidth-delay product", "BDP = B_up × RTT / 8",
             f"{num(upbps0)} bit/s × {num(float(np.ravel(x['rtt_s'])[0]))} s / 8", bdp, "B")
    sent = x["upload_bytes"] / (c.ratio if c else 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        over = np.where(bdp > 0, sent / np.where(bdp > 0, bdp, 1.0), np.inf)
    stacked = np.stack([np.broadcast_to(terms[t], np.shape(per_round)) for t in TERMS])
    dominant_idx = np.argmax(stacked, axis=0)
    dominant = np.asarray(TERMS)[dominant_idx]

    whatifs = []
    base = req.model_dump(exclude={"what_if"})
    for i, w in enumerate(req.what_if):
        # a field given as null replaces nothing (only `compression: null` means "without compression")
        patch = {k: v for k, v in w.model_dump(exclude_unset=True, exclude={"label"}).items()
                 if v is not None or k == "compression"}
        merged = {**base, **patch}
        if "compression" in patch and patch["compression"] is not None:
            merged["compression"] = Compression(**patch["compression"])
        elif merged.get("compression") is not None and not isinstance(merged["compression"], Compression):
            merged["compression"] = Compression(**merged["compression"])
        try:
            v = broadcast({k: merged[k] for k in ("upload_bytes", "download_bytes", "uplink_bits_per_s",
                                                   "downlink_bits_per_s", "rtt_s", "processing_s")})
            t2 = _terms(v["upload_bytes"], v["download_bytes"], v["uplink_bits_per_s"], v["downlink_bits_per_s"],
                        v["rtt_s"], v["processing_s"], merged["compression"])
        except CalcInputError as e:
            raise CalcInputError(("what_if", i) + e.loc, e.message) from None
        total2 = sum(t2[t] for t in TERMS) * merged["rounds"]
        whatifs.append({"label": w.label or ", ".join(f"{k}={v}" for k, v in patch.items()) or f"variant {i + 1}",
                        "total_s": out(total2), "saved_s": out(total - total2),
                        "breakdown": {t: out(t2[t] * merged["rounds"]) for t in TERMS}})
        res.step(f"what-if: {whatifs[-1]['label']}", "T' = same sum with the replaced inputs; saved = T − T'",
                 f"{fmt_s(float(np.ravel(total)[0]))} − {fmt_s(float(np.ravel(total2)[0]))}", total - total2, "s")

    res.outputs = {
        "upload_s": out(terms["upload"] * req.rounds),
        "download_s": out(terms["download"] * req.rounds),
        "per_round_s": out(per_round),
        "total_s": out(total),
        "breakdown": {t: out(terms[t] * req.rounds) for t in TERMS},
        "dominant": out(dominant) if np.ndim(dominant) else str(dominant),
        "bdp_bytes": out(bdp),
        "upload_over_bdp": out(over),
        "what_if": whatifs,
    }
    res.assume(
        "Serial model: the upload finishes before processing starts and the result returns whole; nothing overlaps.",
        "The connection is already open: handshakes, slow start, retransmissions and queueing are not counted.",
        "Rates are bit/s (decimal: 1 Mbit/s = 1e6 bit/s); sizes are bytes (decimal: 1 MB = 1e6 B).",
        "RTT is paid once per round; `rounds` repeats the whole round serially (an agent loop).",
    )
    if c:
        res.assume(f"Compression divides the upload by {num(c.ratio)} and adds {fmt_s(c.codec_s)} of codec time on the critical path.")
    return res


CALCULATORS = [
    Calculator(
        name="edge-transfer",
        family="edge_transfer",
        title="Edge ↔ cloud transfer budget",
        summary="Time of a device→cloud→device request as the sum of upload, round trip, processing, "
                "download and codec, which term dominates, the bandwidth-delay product, and what-ifs.",
        description="Serial model of the book's edge-cloud cases: T = rounds × (bytes_up×8/B_up + RTT + "
                    "t_proc + bytes_down×8/B_down + t_codec). A what-if is a partial request whose fields "
                    "replace the base's; `saved_s` is the base total minus the variant's.",
        request_model=EdgeTransferRequest,
        compute=compute,
        example={"upload_bytes": 30e6, "download_bytes": 5e6, "uplink_bits_per_s": 20e6,
                 "downlink_bits_per_s": 100e6, "rtt_s": 0.1, "processing_s": 0.3,
                 "what_if": [{"label": "model 10× faster", "processing_s": 0.03},
                             {"label": "100 Mbit/s uplink", "uplink_bits_per_s": 100e6},
                             {"label": "lossless 2:1", "compression": {"ratio": 2, "codec_s": 0.15}}]},
        cases=("raw-retouching", "queqiao", "multimodal-stage-placement"),
        sweepable=("upload_bytes", "download_bytes", "uplink_bits_per_s", "downlink_bits_per_s", "rtt_s", "processing_s"),
        chart=Chart(x="uplink_bits_per_s", y=("breakdown.upload", "breakdown.rtt", "breakdown.processing",
                                              "breakdown.download", "breakdown.codec"),
                    kind="stacked-bar", x_label="uplink (bit/s)", y_label="seconds"),
    ),
]

"""Device-to-cloud request budget: serial upload, round trip, processing and download.

The book's edge-cloud method (case `raw-retouching`): a request whose steps depend on each
other costs the *sum* of its terms, so the first question is which term dominates; a what-if
replaces some inputs and reports the time saved. An image can be given by its size in pixels
(`raw`: megapixels, or width × height, at a stated bits per pixel), a request that downloads nothing needs no
downlink, and `on_device` compares shipping the data to the cloud with processing it where it was taken.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, fmt_bytes, fmt_flops, fmt_s, Lookup, NonNegFloat,
    NonNegFloatSweep, num, out, Outputs, OutSweep, PosFloat, PosFloatSweep, PosInt, Profile, request_inputs, Result,
)
from calculators.framework import headline as H
from calculators.domain import hardware_spec, note_scope

TERMS = ("upload", "rtt", "processing", "download", "codec")
TERM_NAMES = {"upload": "the upload", "rtt": "the round trip", "processing": "cloud processing",
              "download": "the download", "codec": "the codec"}


class Compression(CalcRequest):
    """Compress the upload by `ratio` at the cost of `codec_s` seconds of encode + decode."""

    ratio: PosFloat = Field(description="Upload size divided by this (2 = 2:1). Must be > 0.", examples=[2])
    codec_s: NonNegFloat = Field(0.0, description="Extra seconds spent encoding and decoding, on the critical path.")


class RawCapture(CalcRequest):
    """An image (a RAW capture, a screenshot) given by its size in pixels, `megapixels` or `width_px` × `height_px`:
    bytes = pixels × bits_per_pixel × frames / 8 / compression_ratio."""

    megapixels: Annotated[float, Field(gt=0, le=1e6, allow_inf_nan=False)] | None = Field(
        None, description="Pixels of one frame in millions (decimal: 20 MP = 20e6 pixels), instead of width_px × "
        "height_px.", examples=[20])
    width_px: Annotated[int, Field(ge=1, le=10**6)] | None = Field(None, description="Pixels per row.", examples=[8192])
    height_px: Annotated[int, Field(ge=1, le=10**6)] | None = Field(None, description="Rows of pixels.", examples=[5464])
    bits_per_pixel: Annotated[float, Field(gt=0, le=1024, allow_inf_nan=False)] = Field(
        12.0, description="Stored bits per pixel: a Bayer RAW stores one sample per pixel at the sensor's bit depth "
        "(default 12, a 12-bit RAW; 14-bit = 14); 8-bit RGB = 24, 16-bit RGB = 48.", examples=[14])
    frames: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Frames in the capture (a burst or a clip).", examples=[1])
    compression_ratio: PosFloat = Field(1.0, description="The file's own compression: stored size = raw size / ratio "
                                        "(1 = uncompressed RAW; lossless RAW is typically 1.5–2).", examples=[1])


class OnDevice(CalcRequest):
    """Process on the device instead: an explicit time, or the work in FLOPs at a device rate (a peak, given or a
    hardware id's sourced one, × compute_efficiency)."""

    #: `efficiency` is a generic word elsewhere (a stage's, a resource's): the rename holds here only
    renamed_fields = {"efficiency": "compute_efficiency"}

    processing_s: NonNegFloat | None = Field(None, description="Measured seconds of the work on the device, per round.",
                                             examples=[4.0])
    work_flops: NonNegFloat | None = Field(None, description="FLOPs of the work per round (instead of processing_s).",
                                           examples=[2e13])
    peak_flop_per_s: PosFloat | None = Field(None, description="Peak FLOP/s of the device (instead of hardware); × "
                                             "`compute_efficiency` is the device rate.", examples=[5e12])
    hardware: str | None = Field(None, min_length=1, max_length=100, description="Hardware id: its sourced dense peak at "
                                 "`precision` × `compute_efficiency` is the device rate.", examples=["rtx4090"])
    precision: str = Field("FP16", min_length=1, max_length=20, description="Input precision of the peak used with `hardware`.")
    compute_efficiency: Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)] = Field(
        1.0, description="Fraction of the peak the work reaches (default 1: the peak-rate lower bound of the local time).")
    overhead_s: NonNegFloat = Field(0.0, description="Fixed seconds per round on the device besides the work (load, write-back).")


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

    upload_bytes: NonNegFloatSweep | None = Field(None, description="Bytes sent device → cloud per round (decimal: 30 MB = 30e6). "
                                                  "Sweepable. Give this or `raw`.", examples=[30e6])
    raw: RawCapture | None = Field(None, description="An image (a RAW capture, a screenshot) by its megapixels or "
                                   "width × height instead of `upload_bytes`.")
    download_bytes: NonNegFloatSweep = Field(0.0, description="Bytes sent back per round. Sweepable.", examples=[5e6])
    uplink_bits_per_s: PosFloatSweep = Field(description="Uplink rate in bit/s (20 Mbit/s = 20e6). Sweepable.", examples=[20e6])
    downlink_bits_per_s: PosFloatSweep | None = Field(None, description="Downlink rate in bit/s; needed only when "
                                                      "something is downloaded (`download_bytes` > 0). Sweepable.",
                                                      examples=[100e6])
    rtt_s: NonNegFloatSweep = Field(0.0, description="Round-trip time in seconds, paid once per round. Sweepable.", examples=[0.1])
    processing_s: NonNegFloatSweep = Field(0.0, description="Cloud (or any other serial) work per round, seconds. Sweepable.", examples=[0.3])
    compression: Compression | None = Field(None, description="Optional upload compression.")
    rounds: PosInt = Field(1, description="Serially dependent rounds (agent loop steps).")
    what_if: list[EdgeWhatIf] = Field(default_factory=list, max_length=50, description="Variants to compare with the base.")
    on_device: OnDevice | None = Field(None, description="Compare with processing on the device (no transfer at all).")


# --------------------------------------------------------------------------- outputs

TermName = Literal["upload", "rtt", "processing", "download", "codec"]


class Breakdown(Outputs):
    upload: OutSweep = Field(description="Upload time over all rounds, s.")
    rtt: OutSweep = Field(description="Round trips over all rounds, s.")
    processing: OutSweep = Field(description="Cloud (serial) processing over all rounds, s.")
    download: OutSweep = Field(description="Download time over all rounds, s.")
    codec: OutSweep = Field(description="Encode + decode time over all rounds, s.")


class WhatIfOut(Outputs):
    label: str = Field(description="Name of the variant.")
    total_s: OutSweep = Field(description="The variant's total time, s.")
    saved_s: OutSweep = Field(description="Base total minus the variant's, s (negative: slower).")
    breakdown: Breakdown


class EdgeTransferOutputs(Outputs):
    """Outputs of edge-transfer; lists where an input is swept."""

    upload_bytes: OutSweep = Field(description="Bytes uploaded per round before transfer compression, B "
                                              "(from `raw` when given).")
    upload_s: OutSweep = Field(description="Upload time over all rounds, s.")
    download_s: OutSweep = Field(description="Download time over all rounds, s.")
    per_round_s: OutSweep = Field(description="One round: upload + RTT + processing + download + codec, s.")
    total_s: OutSweep = Field(description="All rounds (the cloud path), s.")
    breakdown: Breakdown
    dominant: TermName | list[TermName] = Field(description="The largest term.")
    bdp_bytes: OutSweep = Field(description="Bandwidth-delay product of the uplink, B.")
    upload_over_bdp: OutSweep = Field(description="Bytes sent per round over the BDP (null when the BDP is 0).")
    what_if: list[WhatIfOut] = Field(description="Variants, in request order.")
    raw_bytes: float | None = Field(None, description="Size of the image given as `raw`, B (only with `raw`).")
    cloud_total_s: OutSweep = Field(None, description="Cloud path total (= total_s), s (only with `on_device`).")
    local_per_round_s: float | None = Field(None, description="On-device time per round, s (only with `on_device`).")
    local_total_s: float | None = Field(None, description="On-device time over all rounds, s (only with `on_device`).")
    faster: Literal["device", "cloud"] | list[Literal["device", "cloud"]] | None = Field(
        None, description="Which path finishes first (a tie counts as the device: no network needed).")
    saved_s: OutSweep = Field(None, description="Time saved by the faster path: |cloud_total_s − local_total_s|, s.")


def _terms(upload_bytes, download_bytes, up_bps, down_bps, rtt_s, processing_s, compression) -> dict:
    """Seconds of each term of one round; `down_bps` None: nothing is downloaded (checked by the caller)."""
    ratio = compression.ratio if compression else 1.0
    codec = compression.codec_s if compression else 0.0
    upload = upload_bytes / ratio * 8.0 / up_bps
    download = download_bytes * 8.0 / down_bps if down_bps is not None else 0.0 * (upload + download_bytes)
    return {"upload": upload, "rtt": rtt_s + 0.0 * upload, "processing": processing_s + 0.0 * upload,
            "download": download, "codec": codec + 0.0 * upload}


def _check_downlink(download_bytes, down_bps, loc: tuple) -> None:
    """A download needs a downlink rate; without one, nothing may be downloaded (422 naming the downlink)."""
    if down_bps is None and np.any(np.asarray(download_bytes) > 0):
        raise CalcInputError(loc, "give the downlink rate in bit/s: download_bytes > 0 is sent back over it "
                             "(omit it only when nothing is downloaded)")


_PIXELS_NOTE = ("Image size: pixels × bits per pixel × frames / 8, divided by the file's own compression ratio (1 MP = "
                "10^6 pixels, decimal; a Bayer RAW stores one sample per pixel at the sensor's bit depth); headers, "
                "thumbnails and metadata are not counted.")


def _raw_bytes(req: EdgeTransferRequest, res: Result) -> float | None:
    if req.raw is None:
        if req.upload_bytes is None:
            raise CalcInputError("upload_bytes", "give upload_bytes (bytes per round) or raw (megapixels or width_px × "
                                 "height_px, bits_per_pixel, frames)")
        return None
    if req.upload_bytes is not None:
        raise CalcInputError("raw", "give either raw (the image's size in pixels) or upload_bytes, not both")
    r = req.raw
    if r.megapixels is not None:
        if r.width_px is not None or r.height_px is not None:
            raise CalcInputError(("raw", "megapixels"), "give megapixels or width_px × height_px, not both")
        pixels = res.step("pixels", "pixels = megapixels × 10⁶ (decimal)", f"{num(r.megapixels)} × 10⁶",
                          r.megapixels * 1e6, "pixels")
        size_txt = f"{num(pixels)} px"
    else:
        missing = [k for k in ("width_px", "height_px") if getattr(r, k) is None]
        if missing:
            raise CalcInputError(("raw", missing[0]), "give megapixels, or both width_px and height_px")
        pixels = float(r.width_px * r.height_px)
        size_txt = f"{r.width_px} × {r.height_px} px"
    if "bits_per_pixel" not in r.model_fields_set:
        res.assume(f"Bits per pixel: {num(r.bits_per_pixel)} (a 12-bit Bayer RAW, one sample per pixel), the default; "
                   "give raw.bits_per_pixel for another depth or an RGB image.")
    b = pixels * r.bits_per_pixel * r.frames / 8.0 / r.compression_ratio
    res.step("image size", "bytes = pixels × bits_per_pixel × frames / 8 / compression_ratio",
             f"{size_txt} × {num(r.bits_per_pixel)} × {r.frames} / 8 / {num(r.compression_ratio)} = {fmt_bytes(b)}",
             b, "B")
    return b


def _local(req: EdgeTransferRequest, lookup: Lookup, res: Result) -> float:
    """Seconds of the work on the device per round."""
    d = req.on_device
    if (d.processing_s is None) == (d.work_flops is None):
        raise CalcInputError(("on_device", "processing_s"), "give processing_s (measured) or work_flops (with a device rate), exactly one")
    if d.processing_s is not None:
        for k in ("peak_flop_per_s", "hardware"):
            if getattr(d, k) is not None:
                raise CalcInputError(("on_device", k), "only used with work_flops")
        t = d.processing_s + d.overhead_s
        res.step("on-device time per round", "t_local = processing_s + overhead_s", f"{fmt_s(d.processing_s)} + {fmt_s(d.overhead_s)}",
                 t, "s")
        return t
    if (d.peak_flop_per_s is None) == (d.hardware is None):
        raise CalcInputError(("on_device", "peak_flop_per_s"), "with work_flops give peak_flop_per_s or hardware, exactly one")
    if d.hardware is not None:
        hw = hardware_spec(lookup, d.hardware, ("on_device", "hardware"))
        note_scope(res, hw)
        pk = hw.peak(d.precision, loc=("on_device", "precision"))
        res.cite(pk.provenance)
        rate = pk.flop_per_s * d.compute_efficiency
        res.step("device rate", "peak (dense, matched precision) × compute_efficiency",
                 f"{num(pk.flop_per_s / 1e12)} TFLOP/s ({pk.input_precision}, {pk.unit}) × {num(d.compute_efficiency)}",
                 rate, "FLOP/s")
        if d.compute_efficiency == 1.0:
            res.assume(f"On-device rate: the sourced peak of {hw.id} ({pk.input_precision} dense) with compute_efficiency 1, "
                       "so the local time is a lower bound; give on_device.compute_efficiency (the fraction of peak the work "
                       "reaches).")
    else:
        rate = res.step("device rate", "peak × compute_efficiency", f"{num(d.peak_flop_per_s)} × {num(d.compute_efficiency)}",
                        d.peak_flop_per_s * d.compute_efficiency, "FLOP/s")
    t = d.work_flops / rate + d.overhead_s
    res.step("on-device time per round", "t_local = work_flops / rate + overhead_s",
             f"{fmt_flops(d.work_flops)} / {num(rate / 1e12)} TFLOP/s + {fmt_s(d.overhead_s)}", t, "s")
    return t


def compute(req: EdgeTransferRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    raw_b = _raw_bytes(req, res)
    upload_in = raw_b if raw_b is not None else req.upload_bytes
    _check_downlink(req.download_bytes, req.downlink_bits_per_s, ("downlink_bits_per_s",))
    x = broadcast({"upload_bytes": upload_in, "download_bytes": req.download_bytes,
                   "uplink_bits_per_s": req.uplink_bits_per_s, "rtt_s": req.rtt_s, "processing_s": req.processing_s,
                   **({"downlink_bits_per_s": req.downlink_bits_per_s} if req.downlink_bits_per_s is not None else {})})
    terms = _terms(x["upload_bytes"], x["download_bytes"], x["uplink_bits_per_s"], x.get("downlink_bits_per_s"),
                   x["rtt_s"], x["processing_s"], req.compression)
    c = req.compression
    up0 = float(np.ravel(x["upload_bytes"])[0]); upbps0 = float(np.ravel(x["uplink_bits_per_s"])[0])
    if c:
        res.step("upload", "t_up = (bytes_up / ratio) × 8 / B_up", f"({num(up0)} B / {num(c.ratio)}) × 8 / {num(upbps0)} bit/s",
                 terms["upload"], "s")
        res.step("codec", "t_codec (encode + decode, serial)", f"{num(c.codec_s)} s", terms["codec"], "s")
    else:
        res.step("upload", "t_up = bytes_up × 8 / B_up", f"{num(up0)} B × 8 / {num(upbps0)} bit/s", terms["upload"], "s")
    if "downlink_bits_per_s" in x:
        down0 = float(np.ravel(x["download_bytes"])[0]); downbps0 = float(np.ravel(x["downlink_bits_per_s"])[0])
        res.step("download", "t_down = bytes_down × 8 / B_down", f"{num(down0)} B × 8 / {num(downbps0)} bit/s",
                 terms["download"], "s")
    else:
        res.step("download", "t_down = 0 (nothing is downloaded)", "download_bytes = 0", terms["download"], "s")
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
    base = req.model_dump(exclude={"what_if", "raw", "on_device"})
    base["upload_bytes"] = upload_in
    for i, w in enumerate(req.what_if):
        # a field given as null replaces nothing (only `compression: null` means "without compression")
        patch = {k: v for k, v in w.model_dump(exclude_unset=True, exclude={"label"}).items()
                 if v is not None or k == "compression"}
        merged = {**base, **patch}
        if "compression" in patch and patch["compression"] is not None:
            merged["compression"] = Compression(**patch["compression"])
        elif merged.get("compression") is not None and not isinstance(merged["compression"], Compression):
            merged["compression"] = Compression(**merged["compression"])
        down_field = ("what_if", i, "downlink_bits_per_s" if "download_bytes" in patch else "download_bytes")
        _check_downlink(merged["download_bytes"], merged["downlink_bits_per_s"], down_field)
        try:
            v = broadcast({k: merged[k] for k in ("upload_bytes", "download_bytes", "uplink_bits_per_s",
                                                   "downlink_bits_per_s", "rtt_s", "processing_s")
                           if merged[k] is not None})
            t2 = _terms(v["upload_bytes"], v["download_bytes"], v["uplink_bits_per_s"], v.get("downlink_bits_per_s"),
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
        "upload_bytes": out(x["upload_bytes"]),
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
    if raw_b is not None:
        res.outputs["raw_bytes"] = out(raw_b)
        res.assume(_PIXELS_NOTE)
    local_total = None
    if req.on_device is not None:
        local = _local(req, lookup, res)
        local_total = local * req.rounds
        diff = total - local_total
        faster = np.where(diff >= 0, "device", "cloud")
        saved = np.abs(diff)
        res.step("device vs cloud", "saved = |T_cloud − rounds × t_local|; faster = the smaller",
                 f"|{fmt_s(float(np.ravel(total)[0]))} − {req.rounds} × {fmt_s(local)}|", saved, "s")
        res.outputs.update({"cloud_total_s": out(total), "local_per_round_s": out(local), "local_total_s": out(local_total),
                            "faster": out(faster) if np.ndim(faster) else str(faster), "saved_s": out(saved)})
        res.assume("On device: the work runs where the data is, so no upload, round trip or download is paid; the device's "
                   "time per round is repeated `rounds` times. Energy, battery and thermal limits are not counted.")
    res.headline = _headline(req, res.outputs, raw_b)
    res.assume(
        "Serial model: the upload finishes before processing starts and the result returns whole; nothing overlaps.",
        "The connection is already open: handshakes, slow start, retransmissions and queueing are not counted.",
        "Rates are bit/s (decimal: 1 Mbit/s = 1e6 bit/s); sizes are bytes (decimal: 1 MB = 1e6 B).",
        "RTT is paid once per round; `rounds` repeats the whole round serially (an agent loop).",
    )
    if c:
        res.assume(f"Compression divides the upload by {num(c.ratio)} and adds {fmt_s(c.codec_s)} of codec time on the critical path.")
    return res


def _headline(req: EdgeTransferRequest, o: dict, raw_b: float | None) -> str:
    total = H.scalar(o["total_s"])
    dom = o["dominant"][0] if isinstance(o["dominant"], list) else o["dominant"]
    part = H.scalar(o["breakdown"][dom])
    share = f", {H.fmt_pct(part / total)}" if total and part is not None and total > 0 else ""
    what = f"Shipping the {H.fmt_bytes(raw_b)} image" if raw_b is not None else "The request"
    rounds = f" over {H.plural(req.rounds, 'round')}" if req.rounds > 1 else ""
    s = (f"{what} takes {H.fmt_seconds(total)} via the cloud{rounds}, dominated by {TERM_NAMES.get(dom, dom)} "
         f"({H.fmt_seconds(part)}{share})")
    if "local_total_s" in o:
        faster = o["faster"][0] if isinstance(o["faster"], list) else o["faster"]
        s += (f"; processing on the device takes {H.fmt_seconds(o['local_total_s'])}, so the {faster} is faster by "
              f"{H.fmt_seconds(o['saved_s'])}")
    return H.sentence(s + H.sweep_note(req.upload_bytes, req.download_bytes, req.uplink_bits_per_s,
                                       req.downlink_bits_per_s, req.rtt_s, req.processing_s))


CALCULATORS = [
    Calculator(
        name="edge-transfer",
        profile=Profile(3.9e-07, 356, 117),
        mcp_tool=True,
        family="edge_transfer",
        title="Edge ↔ cloud transfer budget",
        summary="Time of a device→cloud→device request as the sum of upload, round trip, processing, "
                "download and codec, which term dominates, the bandwidth-delay product, and what-ifs.",
        description="Serial model of the book's edge-cloud cases: T = rounds × (bytes_up×8/B_up + RTT + "
                    "t_proc + bytes_down×8/B_down + t_codec). A what-if is a partial request whose fields "
                    "replace the base's; `saved_s` is the base total minus the variant's. With nothing downloaded the "
                    "downlink is not needed. `raw` gives the upload as an image by its pixels (megapixels × 10⁶, or "
                    "width × height) × bits per pixel × frames / 8 / compression ratio (20 MP of a 12-bit Bayer RAW = "
                    "30 MB). `on_device` compares the cloud path with doing the work on the device (measured seconds, "
                    "or work FLOPs / (a peak FLOP/s, given or a hardware id's, × compute_efficiency)): faster path and "
                    "time saved.",
        request_model=EdgeTransferRequest,
        outputs_model=EdgeTransferOutputs,
        compute=compute,
        example={"upload_bytes": 30e6, "download_bytes": 5e6, "uplink_bits_per_s": 20e6,
                 "downlink_bits_per_s": 100e6, "rtt_s": 0.1, "processing_s": 0.3,
                 "what_if": [{"label": "model 10× faster", "processing_s": 0.03},
                             {"label": "100 Mbit/s uplink", "uplink_bits_per_s": 100e6},
                             {"label": "lossless 2:1", "compression": {"ratio": 2, "codec_s": 0.15}}]},
        extra_examples=({"raw": {"width_px": 8192, "height_px": 5464, "bits_per_pixel": 14, "frames": 1},
                         "download_bytes": 5e6, "uplink_bits_per_s": 20e6, "downlink_bits_per_s": 100e6, "rtt_s": 0.1,
                         "processing_s": 0.3, "on_device": {"processing_s": 4.0}},
                        {"upload_bytes": 30e6, "uplink_bits_per_s": [5e6, 20e6, 100e6], "downlink_bits_per_s": 100e6,
                         "rtt_s": 0.1, "processing_s": 0.3,
                         "on_device": {"work_flops": 2e14, "hardware": "rtx4090", "compute_efficiency": 0.4}},
                        {"raw": {"megapixels": 20, "bits_per_pixel": 12}, "uplink_bits_per_s": 20e6, "rtt_s": 0.1,
                         "processing_s": 0.3}),
        cases=("raw-retouching", "queqiao", "multimodal-stage-placement"),
        sweepable=("upload_bytes", "download_bytes", "uplink_bits_per_s", "downlink_bits_per_s", "rtt_s", "processing_s"),
        chart=Chart(x="uplink_bits_per_s", y=("breakdown.upload", "breakdown.rtt", "breakdown.processing",
                                              "breakdown.download", "breakdown.codec"),
                    kind="stacked-bar", x_label="uplink (bit/s)", y_label="seconds"),
    ),
]

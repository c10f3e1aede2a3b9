"""Speed-ups stated every way, and scaling across devices.

Three calculators:
- `speedup`: two measurements of the same work (times, rates, or speed-ups against a common reference)
  turned into every form a report uses — speed-up ×, % more throughput, % less time — and compared with a
  reported label, so "+20 %" and "1.2× faster" are not confused.
- `scaling-efficiency`: throughput measured on different device counts normalised per device, with the
  speed-up and the efficiency against linear scaling from the first point.
- `amdahl`: the end-to-end speed-up of serial parts when some of them get faster, and the limit the unchanged
  parts set.
"""
from __future__ import annotations


from pydantic import Field

import numpy as np

from calculators.framework import (
    aligned, broadcast, CalcInputError, CalcRequest, Calculator, first, Lookup, NonNegFloatSweep, num, out, Outputs,
    OutSweep, PosFloat, PosFloatSweep, PosInt, quiet, request_inputs, Result,
)
from calculators.framework import headline as hf


class Measurement(CalcRequest):
    """One run: give exactly one of `time_s` (with the `work` done in it), `rate_per_s`, or `speedup` (against a
    reference shared by both measurements)."""

    label: str | None = Field(None, max_length=100, description="Name of the run.", examples=["baseline"])
    time_s: PosFloat | None = Field(None, description="Wall time of the run, s.", examples=[15.19])
    work: PosFloat = Field(1.0, description="Units of work done in `time_s` (outputs, requests, tokens); default 1.",
                           examples=[1])
    rate_per_s: PosFloat | None = Field(None, description="Throughput in work units per second (tokens/s, req/s).",
                                        examples=[51.0])
    speedup: PosFloat | None = Field(None, description="Speed relative to a common reference (2.02 = 2.02× the "
                                     "reference); the reference itself is 1.", examples=[2.02])


class SpeedupPair(CalcRequest):
    """A baseline and a new run of the same work."""

    label: str | None = Field(None, max_length=100, description="Name of the comparison.", examples=["overlap scheduler"])
    baseline: Measurement = Field(description="The run compared against.")
    new: Measurement = Field(description="The changed run.")
    reported_gain: float | None = Field(None, ge=-1, le=1e6, allow_inf_nan=False,
                                        description="A gain the source prints for this pair, as a fraction (+20.4 % = "
                                        "0.204), checked against the measurements.", examples=[0.204])


class SpeedupRequest(CalcRequest):
    """One or more comparisons, each of a baseline and a new run."""

    pairs: list[SpeedupPair] = Field(min_length=1, max_length=100, description="Comparisons, each its own baseline.")


def _rate(m: Measurement, loc: tuple, res: Result) -> float:
    given = [k for k in ("time_s", "rate_per_s", "speedup") if getattr(m, k) is not None]
    if len(given) != 1:
        raise CalcInputError(loc, "give exactly one of time_s (with work), rate_per_s or speedup")
    if "work" in m.model_fields_set and given[0] != "time_s":
        raise CalcInputError((*loc, "work"), "work only applies with time_s")
    name = m.label or ".".join(str(p) for p in loc)
    if m.time_s is not None:
        rate = np.float64(m.work) / np.float64(m.time_s)     # may overflow to inf (null in the answer)
        if rate == 0:      # a subnormal work over a long time underflows: there is no rate to compare
            raise CalcInputError((*loc, "work"), f"too small for time_s = {num(m.time_s)} s: work / time_s "
                                 "underflows to 0; give the rate (rate_per_s) or larger units of work")
        return res.step(f"{name}: rate", "rate = work / time", f"{num(m.work)} / {num(m.time_s)} s", rate, "work/s")
    if m.rate_per_s is not None:
        return m.rate_per_s
    return m.speedup


def _pair(i: int, pr: SpeedupPair, res: Result) -> dict:
    loc = ("pairs", i)
    kinds = {k for m in (pr.baseline, pr.new) for k in ("time_s", "rate_per_s", "speedup") if getattr(m, k) is not None}
    if "speedup" in kinds and len(kinds) > 1:
        raise CalcInputError((*loc, "new"), "a speedup is relative to its own reference: give both runs as speedups, "
                             "or neither")
    rb = _rate(pr.baseline, (*loc, "baseline"), res)
    rn = _rate(pr.new, (*loc, "new"), res)
    name = pr.label or f"pair {i + 1}"
    # NumPy floats: a ratio past the float range is inf (null in the answer) instead of an exception
    ratio = np.float64(rn) / np.float64(rb)
    if ratio == 0:     # rates 1e300 apart: the speed-up underflows, and 1/S (the time ratio) has no value
        if np.isinf(rb):
            raise CalcInputError((*loc, "baseline"), "the baseline rate overflows (work / time_s is past the float "
                                 "range): give a longer time_s, less work or the rate_per_s")
        raise CalcInputError((*loc, "new"), f"the speed-up underflows to 0: the new rate ({num(rn)}/s) is too small "
                             f"next to the baseline's ({num(rb)}/s) to compare")
    s = res.step(f"{name}: speed-up", "S = rate_new / rate_base", f"{num(rn)} / {num(rb)}", ratio, "×")
    gain = res.step(f"{name}: throughput gain", "S − 1", f"{num(s)} − 1", s - 1.0, "fraction")
    cut = res.step(f"{name}: time reduction for the same work", "1 − 1/S", f"1 − 1/{num(s)}", 1.0 - 1.0 / s, "fraction")
    o = {"label": name, "baseline_rate": rb, "new_rate": rn, "speedup": s, "throughput_gain": gain,
         "time_reduction": cut, "time_ratio": 1.0 / s}
    if pr.reported_gain is not None:
        o["reported_minus_recomputed"] = res.step(f"{name}: reported − recomputed gain", "g_reported − (S − 1)",
                                                   f"{num(pr.reported_gain)} − {num(gain)}", pr.reported_gain - gain,
                                                   "fraction")
        o["reported_matches_time_reduction"] = bool(abs(pr.reported_gain - cut) < abs(pr.reported_gain - gain))
    return o


@quiet
def speedup_compute(req: SpeedupRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    rows = [_pair(i, pr, res) for i, pr in enumerate(req.pairs)]
    res.outputs = out({"pairs": rows})
    res.assume("Both runs of a pair do the same work; a rate is work per second, a time covers `work` units (default 1).",
               "A speed-up S means S× the throughput, which is 1 − 1/S less time — not S − 1 less time.")
    o, pr = rows[0], req.pairs[0]
    text = (f"{o['label'][:1].upper() + o['label'][1:]}: the new run is {hf.fmt_num(o['speedup'], 4)}× the baseline, "
            f"{hf.fmt_pct(o['throughput_gain'])} more throughput and {hf.fmt_pct(o['time_reduction'])} less time for the "
            "same work")
    if pr.reported_gain is not None and abs(pr.reported_gain - o["throughput_gain"]) > 5e-4:
        text += f" (the reported {hf.fmt_pct(pr.reported_gain)} is off by {hf.fmt_pct(o['reported_minus_recomputed'])})"
    if len(rows) > 1:
        text += f" (first of {len(rows)} comparisons)"
    res.headline = hf.sentence(text)
    return res


class ScalePoint(CalcRequest):
    devices: PosInt = Field(description="Devices (GPUs, cards, nodes) in the run.", examples=[2])
    rate_per_s: PosFloat = Field(description="Total throughput of the run (req/s, tokens/s).", examples=[18.04])


class ScalingRequest(CalcRequest):
    """Throughput at several device counts; the first point is the reference."""

    points: list[ScalePoint] = Field(min_length=1, max_length=100, description="Runs, the reference first.")


@quiet
def scaling_compute(req: ScalingRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    ref = req.points[0]
    ref_per = ref.rate_per_s / ref.devices
    if ref_per == 0:   # a subnormal rate divided by the device count underflows: no reference to compare with
        raise CalcInputError(("points", 0, "rate_per_s"), "too small: the per-device rate underflows to 0")
    rows = []
    for p in req.points:
        per = res.step(f"{p.devices} devices: per device", "rate / devices", f"{num(p.rate_per_s)} / {p.devices}",
                       p.rate_per_s / p.devices, "per s")
        sp = p.rate_per_s / ref.rate_per_s
        eff = res.step(f"{p.devices} devices: efficiency", "(rate/devices) / (rate_ref/devices_ref)",
                       f"{num(per)} / {num(ref_per)}", per / ref_per, "fraction")
        rows.append({"devices": p.devices, "per_device_rate": per, "speedup": sp,
                     "ideal_speedup": p.devices / ref.devices, "efficiency": eff})
    res.outputs = out({"points": rows})
    res.assume("Linear scaling from the first point is the ideal; efficiency < 1 is throughput lost per device.",
               "Each rate is a total over all devices of its run, for the same workload.")
    last = rows[-1]
    res.headline = hf.sentence(
        f"{hf.plural(last['devices'], 'device')} deliver {hf.fmt_num(last['per_device_rate'], 4)} per device per second, "
        f"{hf.fmt_pct(last['efficiency'])} of the {hf.plural(ref.devices, 'device')} reference's "
        f"{hf.fmt_num(ref_per, 4)}")
    return res


class AmdahlPart(CalcRequest):
    name: str = Field(min_length=1, max_length=100, description="Part of the work (prefill, decode …).",
                      examples=["prefill"])
    time_s: NonNegFloatSweep = Field(description="Time of the part before the change, s. Sweepable.", examples=[0.9])
    speedup: PosFloatSweep = Field(1.0, description="How much faster the part becomes (1 = unchanged). Sweepable.",
                                   examples=[3])


class AmdahlRequest(CalcRequest):
    """Serial parts of a job, some of them made faster."""

    parts: list[AmdahlPart] = Field(min_length=1, max_length=100, description="Parts run one after another.")


@quiet
def amdahl_compute(req: AmdahlRequest, lookup: Lookup) -> Result:
    names = [p.name for p in req.parts]
    if len(set(names)) != len(names):
        raise CalcInputError("parts", "part names must be unique")
    named = {}
    for i, p in enumerate(req.parts):
        named[f"t{i}"], named[f"s{i}"] = p.time_s, p.speedup
    x = aligned(broadcast(named))
    before = sum(x[f"t{i}"] for i in range(len(req.parts)))
    after = sum(x[f"t{i}"] / x[f"s{i}"] for i in range(len(req.parts)))
    fixed = sum(x[f"t{i}"] * (x[f"s{i}"] == 1.0) for i in range(len(req.parts)))
    res = Result(inputs=request_inputs(req), outputs={})
    res.step("time before", "Σ t_i", " + ".join(num(first(x[f"t{i}"])) for i in range(len(req.parts))), before, "s")
    res.step("time after", "Σ t_i / s_i", " + ".join(f"{num(first(x[f't{i}']))}/{num(first(x[f's{i}']))}"
                                                     for i in range(len(req.parts))), after, "s")
    sp = res.step("overall speed-up", "before / after", f"{num(first(before))} / {num(first(after))}", before / after, "×")
    accel = res.step("share of time accelerated", "1 − unchanged / before", f"1 − {num(first(fixed))} / {num(first(before))}",
                     1.0 - fixed / before, "fraction")
    limit = res.step("limit (accelerated parts take no time)", "before / unchanged",
                     f"{num(first(before))} / {num(first(fixed))}", np.where(fixed > 0, before / np.where(fixed > 0, fixed, 1.0), np.inf), "×")
    res.outputs = {"before_s": out(before), "after_s": out(after), "speedup": out(sp), "saved_s": out(before - after),
                   "accelerated_fraction": out(accel), "speedup_limit": out(limit)}
    res.assume("The parts run one after another and nothing else changes (Amdahl's law); a part with speed-up 1 bounds "
               "the overall gain.")
    res.headline = hf.sentence(f"The job goes from {hf.fmt_seconds(first(before))} to {hf.fmt_seconds(first(after))}: "
                               f"{hf.fmt_num(first(sp), 3)}× overall, at most {hf.fmt_num(first(limit), 3)}× however fast "
                               f"the accelerated parts get{hf.sweep_note(*named.values())}")
    return res


# =========================================================================== outputs

class SpeedupPairOut(Outputs):
    """One comparison; rates are work units per second (null where a ratio overflows)."""

    label: str = Field(description="Name of the comparison (default: pair N).")
    baseline_rate: float | None = Field(description="Rate of the baseline, work/s (or its speedup against the common "
                                        "reference).")
    new_rate: float | None = Field(description="Rate of the new run, work/s (or its speedup against the reference).")
    speedup: float | None = Field(description="S = new rate / baseline rate, ×.")
    throughput_gain: float | None = Field(description="S − 1, a fraction (0.32 = 32 % more throughput).")
    time_reduction: float | None = Field(description="1 − 1/S, the share of time saved for the same work.")
    time_ratio: float | None = Field(description="1/S, new time / baseline time for the same work.")
    reported_minus_recomputed: float | None = Field(None, description="Reported gain − throughput_gain, a fraction "
                                                    "(with reported_gain).")
    reported_matches_time_reduction: bool | None = Field(None, description="The reported gain is closer to the time "
                                                         "reduction than to the throughput gain (with reported_gain).")


class SpeedupOutputs(Outputs):
    """Outputs of speedup."""

    pairs: list[SpeedupPairOut] = Field(description="Each comparison, in request order.")


class ScalingPointOut(Outputs):
    devices: int = Field(description="Devices of the run.")
    per_device_rate: float | None = Field(description="Total rate / devices, per second per device.")
    speedup: float | None = Field(description="Rate / the reference's rate, × (null where it overflows).")
    ideal_speedup: float | None = Field(description="Devices / the reference's devices (linear scaling), ×.")
    efficiency: float | None = Field(description="Per-device rate / the reference's (1 = linear scaling).")


class ScalingEfficiencyOutputs(Outputs):
    """Outputs of scaling-efficiency."""

    points: list[ScalingPointOut] = Field(description="Each run, the reference first.")


#: a number, or one per point when an input is swept (null where not finite)


class AmdahlOutputs(Outputs):
    """Outputs of amdahl; lists where a part's time or speed-up is swept."""

    before_s: OutSweep = Field(description="Job time before, Σ t_i, s.")
    after_s: OutSweep = Field(description="Job time after, Σ t_i / s_i, s.")
    speedup: OutSweep = Field(description="before / after, ×.")
    saved_s: OutSweep = Field(description="before − after, s.")
    accelerated_fraction: OutSweep = Field(description="Share of the time before in parts that get faster.")
    speedup_limit: OutSweep = Field(description="before / unchanged time: the most any speed-up of the parts gives, "
                                     "× (null when every part is accelerated).")


CALCULATORS = [
    Calculator(
        name="speedup",
        family="other",
        title="Speed-up, throughput gain and time saved",
        summary="Turns two runs of the same work (times, rates or speed-ups against one reference) into the speed-up, "
                "the % more throughput and the % less time, and checks a reported gain against them.",
        description="S = rate_new / rate_base (a time covering `work` units is the rate work/time). Throughput gain "
                    "= S − 1; time saved for the same work = 1 − 1/S. A 1.32× speed-up is 32 % more throughput but "
                    "only 24.2 % less time. Speed-ups given against one reference (2.02× and 2.22× a baseline) "
                    "compare as rates. Limits: the same work on both sides; no variance or confidence interval.",
        request_model=SpeedupRequest,
        compute=speedup_compute,
        outputs_model=SpeedupOutputs,
        example={"pairs": [{"label": "overlap scheduler", "baseline": {"rate_per_s": 51.0}, "new": {"rate_per_s": 60.4},
                            "reported_gain": 0.204}]},
        cases=("communication-tuning", "speculative-execution", "rollout-tail-and-sampling",
               "multimodal-stage-placement"),
        extra_examples=({"pairs": [{"baseline": {"time_s": 15.19, "work": 1}, "new": {"time_s": 43.69, "work": 4}}]},),
    ),
    Calculator(
        name="scaling-efficiency",
        family="other",
        title="Throughput per device and scaling efficiency",
        summary="Normalises throughput measured on different device counts per device, with the speed-up over the "
                "first run and the efficiency against linear scaling.",
        description="per device = rate / devices; speed-up = rate / rate_ref; efficiency = per device / per device of "
                    "the reference (1 = linear scaling). Limits: the same workload at every point; the totals are "
                    "taken as measured.",
        request_model=ScalingRequest,
        compute=scaling_compute,
        outputs_model=ScalingEfficiencyOutputs,
        example={"points": [{"devices": 2, "rate_per_s": 18.04}, {"devices": 4, "rate_per_s": 33.82}]},
        cases=("weight-offload-execution",),
    ),
    Calculator(
        name="amdahl",
        family="other",
        title="Overall speed-up when some parts get faster (Amdahl)",
        summary="The end-to-end speed-up of serial parts when some of them are made faster, and the limit set by the "
                "parts left unchanged.",
        description="before = Σ t_i; after = Σ t_i / s_i; speed-up = before / after; limit = before / Σ(unchanged t_i). "
                    "A 3× faster prefill is 2.5× end to end when decode is 0.1 s of 1 s, and only 1.2× when decode is "
                    "2.7 s. Limits: serial parts, no overlap.",
        request_model=AmdahlRequest,
        compute=amdahl_compute,
        outputs_model=AmdahlOutputs,
        example={"parts": [{"name": "prefill", "time_s": 0.9, "speedup": 3}, {"name": "decode", "time_s": [0.1, 2.7]}]},
        cases=("component-utilization-and-overlap",),
    ),
]

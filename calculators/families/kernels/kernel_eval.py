"""Checks a kernel author runs by hand: softmax state merging, tolerance tests, measurement order, VLIW cycles.

Four calculators:
- `softmax-merge`: attention output of scalar values under softmax scores, computed exactly, by the
  online/blockwise recurrence (max, rescale, sum), with the rescale factor inverted on the accumulator (a sign
  error printed in papers), and by averaging per-block outputs (which loses the normalisers).
- `tolerance-match`: which elements pass |actual − reference| ≤ atol + rtol·|reference|, the matched
  ratio, and whether it clears each required ratio.
- `measurement-order`: mean measured time of options timed in an order (AABB, ABBA, …) while the machine
  drifts additively, and which option looks faster.
- `vliw-cycles`: cycles of a nested loop on a VLIW machine from its instructions per iteration by engine, one per
  bundle or packed into each engine's slots, plus fixed set-up cycles.
"""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, Lookup, NonNegFloat, NonNegInt, num, out, Outputs, PosInt, quiet,
    request_inputs, Result,
)
from calculators.framework import headline as hf

Finite = float


def _f(desc: str, ex):
    return Field(description=desc, examples=[ex])


# =========================================================================== softmax merge

class SoftmaxMergeRequest(CalcRequest):
    scores: list[float] = Field(min_length=1, max_length=10_000, description="Attention scores s_i (logits) of one "
                                "query, in key order. Natural-log units.", examples=[[0.0, 0.6931471805599453]])
    values: list[float] = Field(min_length=1, max_length=10_000, description="Scalar value v_i of each key.",
                                examples=[[1.0, 3.0]])
    block_sizes: list[PosInt] = Field(min_length=1, max_length=10_000, description="Keys per block, in order; they "
                                      "must add up to the number of scores.", examples=[[1, 1]])


@quiet
def softmax_compute(req: SoftmaxMergeRequest, lookup: Lookup) -> Result:
    s = np.asarray(req.scores, dtype=float)
    v = np.asarray(req.values, dtype=float)
    if not (np.all(np.isfinite(s)) and np.all(np.abs(s) < 700) and np.all(np.isfinite(v)) and np.all(np.abs(v) < 1e150)):
        raise CalcInputError("scores", "scores must be finite and below 700 in magnitude, values finite")
    if len(v) != len(s):
        raise CalcInputError("values", f"give one value per score ({len(s)})")
    if sum(req.block_sizes) != len(s):
        raise CalcInputError("block_sizes", f"block sizes add up to {sum(req.block_sizes)}, not {len(s)} scores")
    res = Result(inputs=request_inputs(req), outputs={})
    p = np.exp(s - s.max())
    exact = res.step("exact softmax output", "Σ e^{s_i}·v_i / Σ e^{s_i}", f"{num(float(p @ v))} / {num(float(p.sum()))}",
                     float(p @ v / p.sum()), "value")
    m, l, u = -math.inf, 0.0, 0.0
    li, ui = 0.0, 0.0
    outs = []
    i = 0
    for b in req.block_sizes:
        sb, vb = s[i:i + b], v[i:i + b]
        i += b
        mb = float(sb.max())
        pb = np.exp(sb - mb)
        outs.append(float(pb @ vb / pb.sum()))
        m_new = max(m, mb)
        r = math.exp(m - m_new) if m > -math.inf else 0.0
        q = np.exp(sb - m_new)
        l = r * l + float(q.sum())
        u = r * u + float(q @ vb)
        r_inv = 1.0 / r if r > 0 else 0.0
        li = r * li + float(q.sum())
        ui = r_inv * ui + float(q @ vb)
        m = m_new
    online = res.step("online recurrence", "m' = max(m, max s_b); r = e^{m − m'}; l' = r·l + Σp; U' = r·U + Σp·v; O = U/l",
                      f"{num(u)} / {num(l)}", u / l, "value")
    inverted = res.step("accumulator rescaled by 1/r (sign error)", "U' = U/r + Σp·v, l' as above",
                        f"{num(ui)} / {num(li)}", ui / li, "value")
    naive = res.step("mean of block outputs", "Σ O_b / blocks", f"{num(sum(outs))} / {len(outs)}",
                     sum(outs) / len(outs), "value")
    res.outputs = out({"exact": exact, "online": online, "online_error": online - exact, "inverted_rescale": inverted,
                       "inverted_error": inverted - exact, "block_outputs": outs, "mean_of_block_outputs": naive})
    res.assume("FP64 arithmetic on scalar values, one query; no masking (every block has at least one valid key).",
               "The online state per block is (max m, normaliser l, unnormalised accumulator U); merging rescales the "
               "older state by e^{m_old − m_new}.")
    res.headline = hf.sentence(f"The softmax output is {hf.fmt_num(exact, 6)}; the online merge over "
                               f"{hf.plural(len(outs), 'block')} gives {hf.fmt_num(online, 6)}, the inverted rescale "
                               f"{hf.fmt_num(inverted, 6)} and averaging block outputs {hf.fmt_num(naive, 6)}")
    return res


# =========================================================================== tolerance match

class ElementGroup(CalcRequest):
    count: PosInt = Field(description="Elements with this reference/actual pair.", examples=[18])
    reference: float = Field(ge=-1e300, le=1e300, allow_inf_nan=False, description="Reference value.", examples=[0.0])
    actual: float = Field(ge=-1e300, le=1e300, allow_inf_nan=False, description="Value produced.", examples=[0.0])


class ToleranceRequest(CalcRequest):
    elements: list[ElementGroup] = Field(min_length=1, max_length=10_000, description="Elements, grouped by value.")
    atol: NonNegFloat = Field(description="Absolute tolerance.", examples=[1.0])
    rtol: NonNegFloat = Field(description="Relative tolerance (times |reference|).", examples=[0.3])
    required_ratios: list[float] = Field(default_factory=lambda: [1.0], max_length=100,
                                         description="Matched-element ratios a test may require (0–1).",
                                         examples=[[0.9, 0.95]])


@quiet
def tolerance_compute(req: ToleranceRequest, lookup: Lookup) -> Result:
    for j, q in enumerate(req.required_ratios):
        if not 0 <= q <= 1:
            raise CalcInputError(("required_ratios", j), "a ratio between 0 and 1")
    res = Result(inputs=request_inputs(req), outputs={})
    total = matched = 0
    rows = []
    for g in req.elements:
        err, allow = abs(g.actual - g.reference), req.atol + req.rtol * abs(g.reference)
        ok = err <= allow
        res.step(f"{g.count} × (ref {num(g.reference)}, got {num(g.actual)})", "|a − r| ≤ atol + rtol·|r|",
                 f"{num(err)} ≤ {num(allow)}: {'match' if ok else 'mismatch'}", float(ok), "")
        total += g.count
        matched += g.count if ok else 0
        rows.append({"abs_error": err, "allowed": allow, "matched": ok})
    ratio = res.step("matched ratio", "matched / total", f"{matched} / {total}", matched / total, "fraction")
    passes = [bool(ratio >= q - 1e-12) for q in req.required_ratios]
    res.outputs = out({"total": total, "matched": matched, "mismatched": total - matched, "matched_ratio": ratio,
                       "passes": passes, "groups": rows})
    res.assume("An element matches when |actual − reference| ≤ atol + rtol·|reference| (numpy.isclose's rule); a "
               "test passes when the matched ratio reaches the required ratio.")
    verdicts = ", ".join(f"{'passes' if p else 'fails'} at {hf.fmt_num(q)}" for p, q in zip(passes, req.required_ratios))
    res.headline = hf.sentence(f"{matched} of {total} elements match (ratio {hf.fmt_num(ratio, 4)}): the test {verdicts}")
    return res


# =========================================================================== measurement order

class TimedOption(CalcRequest):
    name: str = Field(min_length=1, max_length=20, description="One-letter (or short) name used in `order`.",
                      examples=["A"])
    true_s: NonNegFloat = Field(description="Time the option really takes, s.", examples=[100e-6])


class MeasurementOrderRequest(CalcRequest):
    options: list[TimedOption] = Field(min_length=1, max_length=20)
    drift_s: list[float] = Field(min_length=1, max_length=10_000, description="Additive drift of each measurement "
                                 "slot, s (e.g. a warming machine: 0, 10, 20, 30 µs).", examples=[[0, 1e-5, 2e-5, 3e-5]])
    orders: list[list[str]] = Field(min_length=1, max_length=20, description="Orders to compare, one option name per "
                                    "slot (e.g. [A, A, B, B] and [A, B, B, A]).",
                                    examples=[[["A", "A", "B", "B"], ["A", "B", "B", "A"]]])


@quiet
def order_compute(req: MeasurementOrderRequest, lookup: Lookup) -> Result:
    true = {o.name: o.true_s for o in req.options}
    if len(true) != len(req.options):
        raise CalcInputError("options", "option names must be unique")
    res = Result(inputs=request_inputs(req), outputs={})
    rows = []
    fastest_true = min(true, key=true.get)
    for j, order in enumerate(req.orders):
        if len(order) != len(req.drift_s):
            raise CalcInputError(("orders", j), f"give one option per drift slot ({len(req.drift_s)})")
        for name in order:
            if name not in true:
                raise CalcInputError(("orders", j), f"unknown option {name!r}")
        means = {}
        for name in true:
            slots = [k for k, o in enumerate(order) if o == name]
            if not slots:
                raise CalcInputError(("orders", j), f"option {name!r} is never measured")
            meas = [true[name] + req.drift_s[k] for k in slots]
            means[name] = res.step(f"{''.join(order)}: {name}", "mean(true + drift of its slots)",
                                   " , ".join(num(x) for x in meas), sum(meas) / len(meas), "s")
        looks = min(means, key=means.get)
        ranked = sorted(means.values())
        margin = res.step(f"{''.join(order)}: apparent margin", "second-lowest mean − lowest mean",
                          f"{num(ranked[1]) if len(ranked) > 1 else 0} − {num(ranked[0])}",
                          ranked[1] - ranked[0] if len(ranked) > 1 else 0.0, "s")
        rows.append({"order": "".join(order), "means_s": [means[n] for n in true],
                     "bias_s": [means[n] - true[n] for n in true], "looks_fastest": looks,
                     "margin_s": margin, "correct": looks == fastest_true})
    res.outputs = out({"options": list(true), "orders": rows, "truly_fastest": fastest_true})
    res.assume("Drift is additive and depends only on the slot; each option's estimate is the mean of its slots.",
               "A palindromic order (ABBA) cancels linear drift; AABB does not.")
    res.headline = hf.sentence("; ".join(f"order {r['order']} makes {r['looks_fastest']} look fastest "
                                         f"({'right' if r['correct'] else 'wrong'})" for r in rows))
    return res


# =========================================================================== VLIW cycles

class EngineOps(CalcRequest):
    engine: str = Field(min_length=1, max_length=40, description="Engine (alu, valu, load, store, flow).",
                        examples=["alu"])
    per_iteration: NonNegInt = Field(description="Instructions of this engine per loop iteration.", examples=[29])
    slots: PosInt = Field(1, description="Instructions of this engine one bundle (cycle) can issue.", examples=[12])


class VliwCyclesRequest(CalcRequest):
    """A loop of `iterations` on a VLIW machine that issues one bundle per cycle."""

    iterations: list[PosInt] = Field(min_length=1, max_length=8, description="Trip counts of the nested loops "
                                     "(multiplied: 256 inputs × 16 rounds = [256, 16]).", examples=[[256, 16]])
    engines: list[EngineOps] = Field(min_length=1, max_length=20, description="Instructions per iteration by engine.")
    packing: str = Field("serial", pattern="^(serial|packed)$", description="serial: one instruction per bundle (an "
                         "unscheduled kernel); packed: each iteration's instructions fill the slots of every engine "
                         "(the bound from the busiest engine, no dependences).", examples=["serial"])
    fixed_cycles: NonNegInt = Field(0, description="Cycles outside the loop (set-up, pauses).", examples=[278])


@quiet
def vliw_compute(req: VliwCyclesRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    n = res.step("iterations", "Π trip counts", " × ".join(str(i) for i in req.iterations), math.prod(req.iterations),
                 "iterations")
    instr = sum(e.per_iteration for e in req.engines)
    if req.packing == "serial":
        per = res.step("cycles per iteration", "Σ instructions (one per bundle)",
                       " + ".join(f"{e.per_iteration} {e.engine}" for e in req.engines), instr, "cycles")
    else:
        per = res.step("cycles per iteration", "max over engines of ceil(instructions / slots)",
                       ", ".join(f"{e.engine} ceil({e.per_iteration}/{e.slots})" for e in req.engines),
                       max(-(-e.per_iteration // e.slots) for e in req.engines), "cycles")
    loop = res.step("loop cycles", "iterations × cycles per iteration", f"{n} × {per}", n * per, "cycles")
    total = res.step("total cycles", "loop + fixed", f"{loop} + {req.fixed_cycles}", loop + req.fixed_cycles, "cycles")
    res.outputs = {"iterations": n, "instructions_per_iteration": instr, "cycles_per_iteration": per,
                   "loop_cycles": loop, "total_cycles": total}
    res.assume("One bundle issues per cycle with no stalls; packed mode ignores dependences, so it is a lower bound.")
    res.headline = hf.sentence(f"{hf.fmt_count(n)} iterations × {hf.plural(per, 'cycle')} + {hf.fmt_count(req.fixed_cycles)} "
                               f"fixed = {hf.fmt_count(total)} cycles ({req.packing})")
    return res


# =========================================================================== outputs

class SoftmaxMergeOutputs(Outputs):
    """Outputs of softmax-merge: attention outputs of one query, in the unit of the values."""

    exact: float | None = Field(description="Exact softmax output Σ e^s·v / Σ e^s.")
    online: float | None = Field(description="Output of the online (blockwise) recurrence; equals `exact` to round-off.")
    online_error: float | None = Field(description="online − exact.")
    inverted_rescale: float | None = Field(description="Output when the accumulator is rescaled by 1/r instead of r "
                                           "(null when that overflows).")
    inverted_error: float | None = Field(description="inverted_rescale − exact (null when it overflows).")
    block_outputs: list[float | None] = Field(description="Each block's own normalised output, in block order.")
    mean_of_block_outputs: float | None = Field(description="Plain mean of the block outputs (drops the normalisers).")


class ToleranceGroupOut(Outputs):
    abs_error: float | None = Field(description="|actual − reference| of the group's elements.")
    allowed: float | None = Field(description="atol + rtol·|reference| (null when it overflows).")
    matched: bool = Field(description="abs_error ≤ allowed.")


class ToleranceMatchOutputs(Outputs):
    """Outputs of tolerance-match."""

    total: int = Field(description="Elements checked (sum of the group counts).")
    matched: int = Field(description="Elements within tolerance.")
    mismatched: int = Field(description="Elements outside tolerance.")
    matched_ratio: float | None = Field(description="matched / total, a fraction 0–1.")
    passes: list[bool] = Field(description="Whether the ratio reaches each required ratio, in request order.")
    groups: list[ToleranceGroupOut] = Field(description="Per element group, in request order.")


class MeasurementOrderRowOut(Outputs):
    order: str = Field(description="The order, its option names joined (e.g. ABBA).")
    means_s: list[float | None] = Field(description="Measured mean time of each option, in option order, s (null "
                                        "when the drift overflows).")
    bias_s: list[float | None] = Field(description="Measured mean minus true time of each option, in option order, s.")
    looks_fastest: str = Field(description="The option with the lowest measured mean.")
    margin_s: float | None = Field(description="Second-lowest measured mean minus the lowest, s (0 with one option).")
    correct: bool = Field(description="The option that looks fastest is the truly fastest.")


class MeasurementOrderOutputs(Outputs):
    """Outputs of measurement-order."""

    options: list[str] = Field(description="Option names, in request order (the order of means_s and bias_s).")
    orders: list[MeasurementOrderRowOut] = Field(description="Each measurement order, in request order.")
    truly_fastest: str = Field(description="The option with the lowest true time.")


class VliwCyclesOutputs(Outputs):
    """Outputs of vliw-cycles: whole counts (past 64 bits the JSON answer writes them as floats)."""

    iterations: int = Field(description="Loop iterations, the product of the trip counts.")
    instructions_per_iteration: int = Field(description="Instructions per iteration over all engines.")
    cycles_per_iteration: int = Field(description="Cycles per iteration: all instructions (serial) or the busiest "
                                      "engine's bundles (packed).")
    loop_cycles: int = Field(description="iterations × cycles_per_iteration.")
    total_cycles: int = Field(description="Loop cycles plus the fixed cycles.")


CALCULATORS = [
    Calculator(
        name="softmax-merge",
        family="other",
        title="Online softmax and block-state merging",
        summary="Checks the blockwise (online) softmax recurrence on small inputs: exact output, the merged block states, "
                "the error of an inverted rescale factor, and the error of averaging per-block outputs.",
        description="Exact: O = Σ e^{s_i} v_i / Σ e^{s_i}. Online: per block m' = max(m, max s_b), r = e^{m − m'}, "
                    "l' = r·l + Σ e^{s − m'}, U' = r·U + Σ e^{s − m'} v, O = U/l — equal to the exact output. The inverted "
                    "variant rescales U by 1/r (the sign printed in some papers); averaging block outputs drops the "
                    "normalisers. Limits: scalar values, one query, no masked blocks.",
        request_model=SoftmaxMergeRequest,
        compute=softmax_compute,
        outputs_model=SoftmaxMergeOutputs,
        example={"scores": [0.0, 0.6931471805599453, 1.3862943611198906], "values": [1, 3, -2], "block_sizes": [2, 1]},
        cases=("attention-tiles-and-io", "fusion-legality-and-precision"),
    ),
    Calculator(
        name="tolerance-match",
        family="other",
        title="Matched-element ratio of a tolerance test",
        summary="Which elements pass |actual − reference| ≤ atol + rtol·|reference|, the matched ratio, and whether a "
                "test requiring a given ratio passes.",
        description="Per group of equal elements: match when |a − r| ≤ atol + rtol·|r|. Matched ratio = matched / total; "
                    "a test passes when the ratio ≥ the required ratio. Limits: says nothing about model quality.",
        request_model=ToleranceRequest,
        compute=tolerance_compute,
        outputs_model=ToleranceMatchOutputs,
        example={"elements": [{"count": 18, "reference": 0, "actual": 0}, {"count": 2, "reference": 0, "actual": 2}],
                 "atol": 1, "rtol": 0.3, "required_ratios": [0.9, 0.95]},
        cases=("optimization-evaluation-and-deployment",),
    ),
    Calculator(
        name="measurement-order",
        family="other",
        title="Measurement order under drift",
        summary="Mean measured time of options timed in a given order (AABB, ABBA) while the machine drifts, the bias, "
                "and which option looks faster.",
        description="Measured = true + drift of the slot; each option's estimate is the mean over its slots. Linear "
                    "drift biases AABB by the slot gap and cancels in ABBA. Limits: additive drift only.",
        request_model=MeasurementOrderRequest,
        compute=order_compute,
        outputs_model=MeasurementOrderOutputs,
        example={"options": [{"name": "A", "true_s": 100e-6}, {"name": "B", "true_s": 90e-6}],
                 "drift_s": [0, 1e-5, 2e-5, 3e-5], "orders": [["A", "A", "B", "B"], ["A", "B", "B", "A"]]},
        cases=("optimization-evaluation-and-deployment",),
    ),
    Calculator(
        name="vliw-cycles",
        family="other",
        title="Cycles of a loop on a VLIW machine",
        summary="Cycles of a nested loop from its instructions per iteration by engine: one instruction per bundle (an "
                "unscheduled kernel) or packed into each engine's slots, plus fixed set-up cycles.",
        description="iterations = Π trip counts; serial: cycles/iteration = Σ instructions; packed: max over engines of "
                    "ceil(instructions / slots). total = iterations × cycles/iteration + fixed. Limits: no stalls, "
                    "packed ignores dependences (a lower bound).",
        request_model=VliwCyclesRequest,
        compute=vliw_compute,
        outputs_model=VliwCyclesOutputs,
        example={"iterations": [256, 16], "engines": [{"engine": "alu", "per_iteration": 29}, {"engine": "load", "per_iteration": 3},
                                                      {"engine": "store", "per_iteration": 2}, {"engine": "flow", "per_iteration": 2}],
                 "fixed_cycles": 278},
        cases=("evaluation-and-agent-records",),
    ),
]

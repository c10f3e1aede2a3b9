"""The deployment planner's search machinery (private to `deployment_plan`): which splits it tries, one stacked
operation list for all of them, the link, queueing and row-building helpers.

A planner search is hardware × splits (tensor-parallel degree, expert-parallel degree, attention data
parallelism) × pipeline stages × batch × mode. The step model's operations do not depend on the hardware, so
they are built once per request (and kept for identical later requests): one decode list per split over every
batch asked, one prefill list per split, then stacked op by op into one list over all (split, batch) points.
Each hardware then costs that one list in a few array passes (`bound_of`, `measured_of`, the link model)
instead of one pass per split.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

from calculators.domain import fit_for, FORMATS, kv_sizes, measured_link_fits, record, resolve_format, shipped_weight_formats
from calculators.framework import CalcInputError, Lookup
from calculators.perf import COMM_KINDS, Op, Split, split_problems, StepOps, step_ops, weight_bytes_per_rank

#: attention data parallelism options of a request
DP_MODES = ("auto", "on", "off")
#: MTP acceptance when the request gives none: the lower end of the 85–90 % acceptance of the second token that
#: the DeepSeek-V3 Technical Report (arXiv:2412.19437, §5.4.3) measured for its MTP module
DEFAULT_MTP_ACCEPTANCE = 0.85


# --------------------------------------------------------------------------- the splits searched

def dp_meaningful(lay) -> bool:
    """Attention data parallelism is searched for MoE models: attention replicated per rank, its KV sharded by
    requests, the experts spread over every rank (ep = tp) with an all-to-all per MoE layer."""
    return bool(lay.moe_layers and lay.experts)


def search_splits(lay, tp: list[int], ep: list[int] | None, dp_mode: str) -> list[Split]:
    """Every (tp, ep, dp-attention) split of the search, in order. Without DP attention: ep from `ep` (default 1
    and every TP degree) where it divides the experts and tp. With it (MoE models, `dp_mode` auto or on): ep = tp,
    for each tp > 1 that `ep` allows and that divides the experts."""
    experts = lay.experts or 0
    ep_set = sorted(set(ep if ep is not None else ([1] + list(tp) if experts else [1])))
    use_dp = dp_mode != "off" and dp_meaningful(lay)
    out: list[Split] = []
    for t in tp:
        if dp_mode != "on" or not use_dp:
            for e in ep_set:
                if e == 1 or (experts and experts % e == 0 and t % e == 0):
                    out.append(Split(tp=t, ep=e))
        if use_dp and t > 1 and t in ep_set and experts % t == 0:
            out.append(Split(tp=t, ep=t, dp_attention=True))
    return out


def count_splits(tp: list[int], ep: list[int] | None) -> int:
    """An upper bound of `search_splits` for any model (the cost model's count, before the model is read)."""
    ep_set = sorted(set(ep if ep is not None else [1] + list(tp)))
    pairs = sum(1 for t in tp for e in ep_set if e == 1 or t % e == 0)
    return pairs + sum(1 for t in tp if t > 1 and t in ep_set)


# --------------------------------------------------------------------------- formats

def weight_formats(rec, weight_format):
    """(component → format, the name of the main format): the request's one format, else the shipped ones."""
    if weight_format is not None:
        fmt = resolve_format(weight_format, "weight_format")
        return (lambda c: fmt), fmt.name
    shipped = shipped_weight_formats(rec.weight_dtype)
    if shipped is None:
        return (lambda c: FORMATS["bf16"]), "bf16"
    return shipped.for_component, shipped.main.name


def mtp_tokens_per_step(acceptance: float, drafts: int) -> float:
    """Expected tokens a sequence gains per step with `drafts` chained draft tokens, each accepted with probability
    `acceptance` once the ones before it were: 1 + α + … + α^drafts."""
    return float(sum(acceptance ** i for i in range(drafts + 1)))


# --------------------------------------------------------------------------- one stacked operation list

def stack_steps(steps: list[StepOps]) -> StepOps:
    """Operation lists (one per split, each over its own points) as one list over the concatenation of their
    points: ops are matched by (name, group); where a split lacks an op (no all-reduce at TP 1) its points get
    count 0 and the shape of another split, so every kernel lookup stays valid and adds nothing."""
    shapes = [st.shape for st in steps]
    sizes = [int(np.prod(sh)) for sh in shapes]
    starts = np.concatenate([[0], np.cumsum(sizes)]).tolist()
    by_step = [{(o.name, o.group): o for o in st.ops} for st in steps]
    first: dict[tuple, Op] = {}
    for ops in by_step:
        for key, op in ops.items():
            first.setdefault(key, op)

    def cat(values, fill) -> np.ndarray:
        values = [fill if v is None else v for v in values]
        if not any(isinstance(v, np.ndarray) and v.ndim for v in values):      # one number per split
            return np.repeat(np.asarray(values, dtype=float), sizes)
        out = np.empty(starts[-1])
        for v, sh, n, a in zip(values, shapes, sizes, starts):
            if np.ndim(v) == 0 or np.size(v) == n:
                out[a:a + n] = np.ravel(v) if np.ndim(v) else v
            else:
                out[a:a + n] = np.broadcast_to(np.asarray(v, dtype=float), sh).ravel()
        return out

    out: list[Op] = []
    for key, op0 in first.items():
        per = [ops.get(key) for ops in by_step]
        present = [o for o in per if o is not None]
        if any(o.kind != op0.kind or o.dtype != op0.dtype for o in present):
            raise ValueError(f"op {key} differs in kind or precision between splits")
        shape = {}
        for name, v0 in op0.shape.items():
            vals = [o.shape.get(name) if o is not None else None for o in per]
            if all(np.ndim(v) == 0 and not isinstance(v, np.ndarray) for v in vals if v is not None) and \
                    len({v for v in vals if v is not None}) == 1:
                shape[name] = v0            # the same scalar everywhere (a head size, a window, a flag)
            else:
                tmpl = float(np.ravel(np.asarray(v0, dtype=float))[0])
                shape[name] = cat(vals, tmpl)
        out.append(Op(op0.name, op0.kind, op0.group, cat([o.count if o is not None else 0.0 for o in per], 0.0),
                      cat([o.flops if o is not None else 0.0 for o in per], 0.0),
                      cat([o.bytes if o is not None else 0.0 for o in per], 0.0), op0.dtype, shape))
    notes = list(dict.fromkeys(n for st in steps for n in st.notes))
    return StepOps(steps[0].phase, steps[0].split, out, cat([st.batch for st in steps], 1.0),
                   cat([st.new_tokens for st in steps], 1.0), cat([st.context_tokens for st in steps], 0.0), notes,
                   steps[0].layout)


def kernels_only(step: StepOps) -> StepOps:
    """The same step without its collectives (the planner times those over its own link)."""
    return StepOps(step.phase, step.split, [o for o in step.ops if o.kind not in COMM_KINDS], step.batch,
                   step.new_tokens, step.context_tokens, step.notes, step.layout)


@dataclass
class StepTable:
    """Everything of a search that does not depend on the hardware: per split its weights per rank (per pp), KV per
    request per device, and the stacked decode (valid split × batch) and prefill (valid split) operation lists
    (None when no split is valid)."""

    splits: list[Split]
    batches: np.ndarray
    stack_pos: np.ndarray                        # per split: its position among the valid ones (−1: invalid)
    decode: StepOps | None
    prefill: StepOps | None
    decode_kernels: StepOps | None
    prefill_kernels: StepOps | None
    weights: dict[tuple[int, int], float]        # (split index, pp) → weight bytes per rank
    kv_per_request: np.ndarray                   # per split: KV bytes per request on one device (one stage)
    mtp_kv_per_request: np.ndarray               # per split: the MTP modules' KV per request per device
    notes: list[str] = field(default_factory=list)
    layout: object = None


_TABLES: OrderedDict = OrderedDict()
_TABLES_KEPT = 8
_TABLES_LOCK = threading.Lock()         # the server runs calculations on a small thread pool


def step_table(lay, groups, splits: list[Split], pp: list[int], batches: list[int], ctx_mean: int, ctx_end: int,
               prefill_tokens: int, wfun, wkey, kfmt, skew: float, mtp_drafts: int) -> StepTable:
    """The hardware-independent part of a search (memoised for the last few identical searches: the op lists of a
    layout, split set, batches, contexts, formats, skew and MTP setting)."""
    key = (id(lay), tuple(splits), tuple(pp), tuple(batches), ctx_mean, ctx_end, prefill_tokens, wkey, repr(kfmt),
           float(skew), int(mtp_drafts))
    with _TABLES_LOCK:
        hit = _TABLES.get(key)
        if hit is not None and hit.layout is lay:      # the layout itself, not another one at a reused address
            _TABLES.move_to_end(key)
            return hit
    bs = np.asarray(sorted(set(batches)), dtype=float)
    dec, pre = [], []
    pos = np.full(len(splits), -1, dtype=np.int64)
    for i, s in enumerate(splits):
        if split_problems(lay, s):
            continue
        pos[i] = len(dec)
        dec.append(step_ops(lay, "decode", bs, 1 + mtp_drafts, ctx_mean, s, wfun, kfmt, expert_skew=skew,
                            mtp_drafts=mtp_drafts))
        pre.append(step_ops(lay, "prefill", 1, prefill_tokens, 0, s, wfun, kfmt, expert_skew=skew, mtp_drafts=mtp_drafts))
    weights = {}
    for i, s in enumerate(splits):
        for q in pp:
            weights[(i, q)] = float(weight_bytes_per_rank(lay, Split(s.tp, s.ep, q, s.dp_attention), wfun,
                                                          mtp=mtp_drafts > 0)["per_rank"])
    kv = np.zeros(len(splits))
    kv_mtp = np.zeros(len(splits))
    by_at: dict[int, tuple[float, float]] = {}
    for i, s in enumerate(splits):
        at = s.attention_tp
        if at not in by_at:
            sizes = kv_sizes(groups, kfmt, FORMATS["fp32"], np.asarray(ctx_end), tp=at)
            extra = 0.0
            if mtp_drafts:
                extra = mtp_drafts * _one_layer_kv(lay, sizes)
            by_at[at] = (float(sizes.device_bytes_per_request), extra)
        kv[i], kv_mtp[i] = by_at[at]
    if dec:
        sd, sp = stack_steps(dec), stack_steps(pre)
        table = StepTable(splits, bs, pos, sd, sp, kernels_only(sd), kernels_only(sp), weights, kv, kv_mtp, sd.notes, lay)
    else:
        table = StepTable(splits, bs, pos, None, None, None, None, weights, kv, kv_mtp, [], lay)
    with _TABLES_LOCK:
        _TABLES[key] = table
        while len(_TABLES) > _TABLES_KEPT:
            _TABLES.popitem(last=False)
    return table


def _one_layer_kv(lay, sizes) -> float:
    """KV bytes per request per device of one layer of the mixer group an MTP module copies (the step model's
    rule: the first full-attention, MLA or compressed group, else the first group)."""
    pick = next((m for m in lay.mixers if m.kind in ("mla", "compressed") or (m.kind == "attention" and m.window is None)),
                lay.mixers[0])
    name = pick.name
    for g in sizes.groups:
        if g["name"] == name and g["count"]:
            return float(np.asarray(g["per_device_bytes_per_request"])) / float(g["count"])
    return float(sizes.device_bytes_per_request) / max(lay.mixer_layers, 1)


# --------------------------------------------------------------------------- links

def link_fits(lookup: Lookup, hw, link_id: str | None):
    """(measured all-reduce fits or None, link id, datasheet one-way bytes/s or None) of the TP link."""
    lid = link_id or (hw.links[0] if hw.links else None)
    if lid is None:
        return None, None, None
    fits = measured_link_fits(lookup, lid, hw.id)
    bw = None
    if not fits:
        try:
            bw = record(lookup, "link", lid, "link").value("one_way_bytes_per_s", required=False)
        except CalcInputError:
            bw = None
    return fits, lid, bw


def allreduce_s(fits, bw, gpus: np.ndarray, message_bytes: np.ndarray) -> np.ndarray:
    """One ring all-reduce of `message_bytes` over `gpus` ranks (0 for one rank)."""
    g, m = np.broadcast_arrays(np.asarray(gpus, dtype=float), np.asarray(message_bytes, dtype=float))
    t = np.zeros(g.shape)
    for p in np.unique(g):
        if p <= 1:
            continue
        sel = g == p
        if fits:
            f, _ = fit_for(fits, int(p))
            t[sel] = f.start_up_s + m[sel] / f.algorithm_bytes_per_s
        elif bw:
            t[sel] = 2 * (p - 1) / p * m[sel] / bw
    return t


def link_time(fits, bw, step: StepOps) -> np.ndarray:
    """Seconds of a step's collectives over the TP link, per point. An all-reduce of M bytes moves 2(p−1)/p·M per
    rank; an all-to-all moves its own bytes once, so it is timed as the all-reduce of M·p/(2(p−1)) (same start-up)."""
    t = np.zeros(step.shape)
    for op in step.ops:
        if op.kind not in ("allreduce", "alltoall"):
            continue
        g = np.asarray(op.shape["gpus"], dtype=float)
        m = np.asarray(op.shape["bytes"], dtype=float)
        if op.kind == "alltoall":
            with np.errstate(divide="ignore", invalid="ignore"):
                m = np.where(g > 1, m * g / (2.0 * (g - 1.0)), 0.0)
        t = t + np.asarray(op.count, dtype=float) * allreduce_s(fits, bw, g, m)
    return t


# --------------------------------------------------------------------------- queueing

def p90_wait(rho: np.ndarray, service: np.ndarray) -> np.ndarray:
    """90th-percentile queueing wait with the M/M/1 tail, P(W > t) = ρ·e^(−(1−ρ)t/S): a conservative stand-in for
    M/D/1 (deterministic service queues less)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(rho > 0.1, np.log(10 * rho) * service / (1 - rho), 0.0)
    return np.where(rho < 1, np.maximum(w, 0.0), np.inf)


def max_load_for_ttft(t_p: np.ndarray, target: float, cap: float) -> np.ndarray:
    """Largest prefill utilisation ρ ≤ cap with t_p + p90 wait(ρ) ≤ target, 0 when none: bisection (the wait grows
    with ρ), vectorised over the distinct prefill times only."""
    t_p = np.asarray(t_p, dtype=float)
    u, inv = np.unique(t_p.ravel(), return_inverse=True)
    lo = np.zeros_like(u)
    hi = np.full_like(u, cap)
    ok_hi = u + p90_wait(hi, u) <= target
    for _ in range(40):
        mid = (lo + hi) / 2
        ok = u + p90_wait(mid, u) <= target
        lo = np.where(ok, mid, lo)
        hi = np.where(ok, hi, mid)
    rho = np.where(u < target, np.where(ok_hi, cap, lo), 0.0)
    return rho[inv].reshape(t_p.shape)


# --------------------------------------------------------------------------- answers

def col(a) -> list:
    """An array as a JSON-able list: floats, with null where not finite."""
    a = np.asarray(a, dtype=float)
    return np.where(np.isfinite(a), a, None).tolist()


_ROW_BUILDERS: dict[tuple, object] = {}


def rows(columns: dict[str, list], n: int, constants: dict | None = None) -> list[dict]:
    """Column lists (plus `constants`, the same in every row) → one dict per configuration. The comprehension is a
    dict display generated once per set of keys, constants bound as its defaults: about twice as fast as
    dict(zip(...)) per row, which matters at 10^4 rows."""
    if not n:
        return []
    constants = constants or {}
    keys = tuple(columns)
    ckeys = tuple(constants)
    build = _ROW_BUILDERS.get((keys, ckeys))
    if build is None:
        names = [f"c{i}" for i in range(len(keys))]
        knames = [f"k{i}" for i in range(len(ckeys))]
        body = ", ".join([f"{k!r}: {v}" for k, v in zip(keys, names)] + [f"{k!r}: {v}" for k, v in zip(ckeys, knames)])
        args = "".join(f", {k}" for k in knames)
        build = eval(f"lambda cols{args}: [{{{body}}} for {', '.join(names)}, in zip(*cols)]")  # noqa: S307 - keys are ours
        _ROW_BUILDERS[(keys, ckeys)] = build
    return build([columns[k] for k in keys], *constants.values())


def money(price, devices, lam, req):
    """$/h, $ per million output tokens and per million total tokens (arrays; NaN without a price)."""
    if price is None:
        nan = np.full(np.shape(devices), np.nan)
        return nan, nan, nan
    per_h = devices * price
    return (per_h, per_h / (lam * req.output_tokens * 3600.0) * 1e6,
            per_h / (lam * (req.input_tokens + req.output_tokens) * 3600.0) * 1e6)

"""The two step models behind `parallel-split`, and its ranking of TP × replicas for a fixed number of devices.

- `FirstPass`: the book's first-pass decode model, T(p) = (W + KV)/(p·B_hbm) + n_ar·t_ar(p) (+ a compute term when
  FLOPs per token and a peak are given), per_device = (W + KV)/(p·pp) + workspace.
- `Layers`: the step model of the model's layer layout (`calculators.perf.step_ops`) on one rank of each TP degree:
  its peak-rate bound max(ΣF/peak, ΣB/B_hbm), the all-reduces the split needs timed over the TP link, and the memory
  one device holds (its share of each weight component in its format, the KV of its heads).

Both answer `times(p, batch)` over arrays of TP degrees and batches per replica, and `max_batch(p, capacity)`.
`rank_options` turns the times at each TP degree into the ranked options of `devices: N`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from calculators.domain import FORMATS, Fmt, kv_sizes, Layout, resolve_format, shipped_weight_formats
from calculators.perf import bound_of, collective_cost, Rates, Split, step_ops, weight_bytes_per_rank

ACT_BYTES = 2.0


def weight_formats(rec, weight_format) -> tuple[Callable[[str], Fmt], str]:
    """(component → format, its label): the request's one format, else the model's published ones, else BF16."""
    if weight_format is not None:
        fmt = resolve_format(weight_format, "weight_format")
        return (lambda c: fmt), fmt.name
    shipped = shipped_weight_formats(rec.weight_dtype) if rec is not None else None
    if shipped is None:
        return (lambda c: FORMATS["bf16"]), "bf16"
    return shipped.for_component, shipped.label or shipped.main.name


def _ring(alpha, bw, p, msg):
    """One ring all-reduce of `msg` bytes over `p` ranks with start-up α per round and one-way bandwidth `bw`."""
    c = collective_cost("all_reduce", "ring", p, msg)
    return c["rounds"] * alpha + (c["wire"] / bw if bw is not None else 0.0 * p)


def _per(x, n: int) -> np.ndarray:
    """A scalar or per-candidate value as an array over the n candidates (None: infinite, i.e. no term)."""
    return np.broadcast_to(np.asarray(np.inf if x is None else x, dtype=float), (n,))


@dataclass
class FirstPass:
    """The book's first-pass model with its resolved inputs (W, W read, KV of one sequence, layers, hidden …)."""

    W: float
    W_read: float
    kv_seq: float                 # KV/state bytes of one sequence
    layers: int
    hidden: float | None
    allreduces_per_layer: int
    message_bytes: float | None   # explicit M (else hidden × step tokens × activation bytes)
    activation_bytes: float
    step_tokens: int | None
    flops_per_token: float | None
    peak_flop_per_s: float | None
    B_hbm: float
    pp: int
    workspace: float
    handoff: Callable[[Any], Any]  # step tokens → one stage hand-off, s

    def tokens(self, b):
        return self.step_tokens if self.step_tokens is not None else b

    def message(self, b):
        return self.message_bytes if self.message_bytes is not None else self.hidden * self.tokens(b) * self.activation_bytes

    def times(self, p: np.ndarray, b: np.ndarray, alpha, bw) -> dict:
        p, b = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(b, dtype=float))
        KV = self.kv_seq * b
        tok = self.tokens(b) + 0.0 * p
        mem_t = (self.W_read + KV) / (p * self.B_hbm)
        ar_t = _ring(alpha, bw, p, self.message(b) + 0.0 * p)
        comm_t = self.layers * self.allreduces_per_layer * ar_t
        comp_t = np.zeros_like(p)
        if self.flops_per_token is not None and self.peak_flop_per_s is not None:
            comp_t = tok * self.flops_per_token / (p * self.peak_flop_per_s)
        hand_t = (self.pp - 1) * self.handoff(tok) + 0.0 * p
        per_dev = (self.W + KV) / (p * self.pp) + self.workspace
        return {"mem_t": mem_t, "comp_t": comp_t, "ar_t": ar_t, "comm_t": comm_t, "hand_t": hand_t,
                "step": np.maximum(mem_t, comp_t) + comm_t + hand_t, "per_dev": per_dev}

    def max_batch(self, p: np.ndarray, capacity: float) -> np.ndarray:
        room = (capacity - self.workspace) * np.asarray(p, dtype=float) * self.pp - self.W
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.floor(room / np.float64(self.kv_seq))

    def totals(self, b: int) -> dict:
        return {"weight_bytes": self.W, "kv_bytes": self.kv_seq * b, "message_bytes": self.message(b),
                "allreduces": int(self.layers * self.allreduces_per_layer)}


@dataclass
class Layers:
    """The step model of one model layout: decode steps of one rank per TP degree (pp stages, ep = 1)."""

    lay: Layout
    groups: list
    rates: Rates
    wf: Callable[[str], Fmt]
    kf: Fmt
    context: int
    pp: int
    workspace: float
    handoff: Callable[[Any], Any]
    _w: dict = field(default_factory=dict)
    _kv: dict = field(default_factory=dict)

    def weights(self, t: int) -> dict:
        if t not in self._w:
            self._w[t] = weight_bytes_per_rank(self.lay, Split(tp=t, pp=self.pp), self.wf)
        return self._w[t]

    def kv_per_seq(self, t: int) -> tuple[float, float]:
        """(KV/state bytes of one sequence on one rank of one stage, of the whole model) at the context length."""
        if t not in self._kv:
            s = kv_sizes(self.groups, self.kf, FORMATS["fp32"], np.asarray(self.context, dtype=np.int64), tp=t)
            self._kv[t] = (float(s.device_bytes_per_request) / self.pp, float(s.bytes_per_request))
        return self._kv[t]

    def times(self, p: np.ndarray, b: np.ndarray, alpha, bw) -> dict:
        p, b = np.broadcast_arrays(np.asarray(p, dtype=float), np.asarray(b, dtype=float))
        n = p.size
        p, b = p.reshape(n), b.reshape(n)
        a_, bw_ = _per(alpha if alpha is not None else 0.0, n), _per(bw, n)
        o = {k: np.zeros(n) for k in ("mem_t", "comp_t", "ar_t", "comm_t", "bytes", "flops", "w_dev", "kv_dev")}
        for t, bb in sorted({(int(x), float(y)) for x, y in zip(p, b)}):
            sel = (p == t) & (b == bb)
            ops = step_ops(self.lay, "decode", bb, 1, self.context, Split(tp=t, pp=self.pp), self.wf, self.kf)
            bd = bound_of(ops, self.rates)
            o["mem_t"][sel], o["comp_t"][sel] = float(bd.memory_s), float(bd.compute_s)
            o["bytes"][sel], o["flops"][sel] = float(bd.bytes), float(bd.flops)
            for op in ops.ops:
                if op.kind == "allreduce":
                    one = _ring(a_[sel], bw_[sel], float(op.shape["gpus"]), float(np.asarray(op.shape["bytes"])))
                    o["ar_t"][sel] = one
                    o["comm_t"][sel] += op.count * one
            o["w_dev"][sel] = self.weights(t)["per_rank"]
            o["kv_dev"][sel] = self.kv_per_seq(t)[0] * bb
        o["hand_t"] = (self.pp - 1) * self.handoff(b) + 0.0 * p
        o["step"] = np.maximum(o["mem_t"], o["comp_t"]) + o["comm_t"] + o["hand_t"]
        o["per_dev"] = o["w_dev"] + o["kv_dev"] + self.workspace
        return o

    def max_batch(self, p: np.ndarray, capacity: float) -> np.ndarray:
        ts = [int(t) for t in np.asarray(p).reshape(-1)]
        room = np.array([capacity - self.workspace - self.weights(t)["per_rank"] for t in ts])
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.floor(room / np.array([self.kv_per_seq(t)[0] for t in ts]))

    def totals(self, b: int) -> dict:
        return {"weight_bytes": self.weights(1)["total"], "kv_bytes": self.kv_per_seq(1)[1] * b,
                "message_bytes": b * float(self.lay.d) * ACT_BYTES, "allreduces": int(2 * self.lay.layers)}


def rank_options(tp: list[int], pp: int, devices: int, batch: np.ndarray, step: np.ndarray, measured: np.ndarray | None,
                 per_dev: np.ndarray, fits: np.ndarray) -> list[dict]:
    """One option per TP degree (devices/(tp·pp) replicas), ranked by output tokens/s per device, best first; options
    that do not fit (or fit no sequence) come last, unranked."""
    timed = measured if measured is not None else step
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = np.where(batch >= 1, batch / timed / (np.asarray(tp) * pp), np.nan)
    ok = fits & (batch >= 1) & np.isfinite(rate)
    order = sorted(range(len(tp)), key=lambda i: (not ok[i], -rate[i] if ok[i] else 0.0, tp[i]))
    options = []
    for r, i in enumerate(order):
        opt = {"rank": r + 1 if ok[i] else None, "tp": int(tp[i]), "pp": pp, "replicas": devices // (tp[i] * pp),
               "batch": int(max(batch[i], 0)), "step_time_s": float(step[i]) if batch[i] >= 1 else None,
               "tokens_per_s_per_device": float(rate[i]) if ok[i] else None,
               "memory_per_device_bytes": float(per_dev[i]) if batch[i] >= 1 else None, "fits": bool(ok[i])}
        if measured is not None:
            opt["measured_step_time_s"] = float(measured[i]) if batch[i] >= 1 else None
        options.append(opt)
    return options


__all__ = ["FirstPass", "Layers", "rank_options", "weight_formats"]

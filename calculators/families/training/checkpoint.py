"""Checkpoint: bytes of weights + optimizer state, save/restore time, interval and lost work.

Mixed-precision Adam keeps per parameter a BF16 weight (2 B), an FP32 master copy (4 B) and two
FP32 moments (8 B): 14 B/param in a full checkpoint. Time to write = bytes / storage bandwidth.
With a failure rate, the Young/Daly interval τ ≈ √(2·C·MTBF) balances checkpoint cost C against
the work lost on a failure (on average half an interval, plus the restore).
"""
from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field, model_validator

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_s, Lookup, NonNegFloat, num,
    out, Outputs, OutSweep, PosFloatSweep, Profile, request_inputs, Result,
)
from calculators.domain import MODEL_CONFIG_FIELD, model_record
from calculators.framework import headline as hf

#: bytes per parameter of one part of the state (0 = not saved), at most 64; the bound sits inside the type,
#: where pydantic enforces it (a `le=` given to Field() next to a core alias is overridden by the alias's bound)
ByteCount = Annotated[float, Field(ge=0, le=64, allow_inf_nan=False)]
#: total bytes per parameter, replacing the parts, at most 1024
StateBytes = Annotated[float, Field(gt=0, le=1024, allow_inf_nan=False)]


class CheckpointRequest(CalcRequest):
    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store (params_total).", examples=["qwen3-8b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    params: PosFloatSweep | None = Field(None, description="Parameter count. Sweepable.", examples=[8e9])
    weight_bytes_per_param: ByteCount = Field(2.0, description="Working weights (BF16 = 2).")
    master_bytes_per_param: ByteCount = Field(4.0, description="FP32 master weights (0 = none).")
    optimizer_bytes_per_param: ByteCount = Field(8.0, description="Optimizer moments (Adam m + v in FP32 = 8).")
    gradient_bytes_per_param: ByteCount = Field(0.0, description="Gradients, when they are saved too (usually 0).")
    state_bytes_per_param: StateBytes | None = Field(None, description="Total bytes per parameter, replacing the four fields above.")
    extra_bytes: NonNegFloat = Field(0.0, description="Other state saved with it (data position, RNG, scheduler…), bytes.")
    write_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Aggregate effective write bandwidth to durable storage, B/s. Sweepable.", examples=[8e9])
    read_bandwidth_bytes_per_s: PosFloatSweep | None = Field(None, description="Aggregate effective read bandwidth for restore (default = write). Sweepable.")
    blocking_s: NonNegFloat | None = Field(None, description="Training pause per checkpoint when saving is asynchronous (snapshot to host); default: the whole write blocks.")
    interval_s: PosFloatSweep | None = Field(None, description="Time between checkpoints. Sweepable.", examples=[600])
    mtbf_s: PosFloatSweep | None = Field(None, description="Mean time between failures of the whole job, seconds. Sweepable.", examples=[86400])

    @model_validator(mode="after")
    def _check(self):
        given = [k for k in ("model", "hf_config", "params") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of model, model_config, params")
        return self


def compute(req: CheckpointRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req, exclude_none=True), outputs={})
    rec = None
    if req.model is not None or req.hf_config is not None:
        rec = model_record(req, lookup, res)
        if req.hf_config is not None and "params_total" not in rec:
            raise CalcInputError("model_config", f"attention '{rec.attention}' has no parameter ledger here, so the "
                                 "config gives no parameter count: give `params` instead")
        params = float(rec.value("params_total", loc="model" if req.model is not None else "model_config"))
        res.cite(rec.source("params_total"))
    else:
        params = req.params
    x = broadcast({"params": params,
                   "write_bandwidth_bytes_per_s": req.write_bandwidth_bytes_per_s or 1.0,
                   "read_bandwidth_bytes_per_s": req.read_bandwidth_bytes_per_s or req.write_bandwidth_bytes_per_s or 1.0,
                   "interval_s": req.interval_s or 1.0, "mtbf_s": req.mtbf_s or 1.0})
    N = x["params"]
    o: dict = {"params": out(N)}
    if req.state_bytes_per_param is not None:
        per = req.state_bytes_per_param
        total = res.step("checkpoint bytes", "N × bytes/param + extra", f"{num(first(N))} × {num(per)} + {num(req.extra_bytes)}",
                         N * per + req.extra_bytes, "B")
        o.update(bytes_per_param=per)
    else:
        parts = {"weights": req.weight_bytes_per_param, "master": req.master_bytes_per_param,
                 "optimizer": req.optimizer_bytes_per_param, "gradients": req.gradient_bytes_per_param}
        per = sum(parts.values())
        for k, v in parts.items():
            o[f"{k}_bytes"] = out(N * v)
        res.step("weights", "N × weight bytes", f"{num(first(N))} × {num(req.weight_bytes_per_param)}", N * req.weight_bytes_per_param, "B")
        total = res.step("checkpoint bytes", "N × (w + master + optimizer + grads) + extra",
                         f"{num(first(N))} × ({' + '.join(num(v) for v in parts.values())}) + {num(req.extra_bytes)}",
                         N * per + req.extra_bytes, "B")
        o.update(bytes_per_param=per)
    o["checkpoint_bytes"] = out(total)
    res.assume("Bytes are logical payload: file-format headers, alignment and storage replication are not counted.")
    if req.write_bandwidth_bytes_per_s is None:
        res.outputs = o
        res.headline = _headline(req, o, rec)
        return res
    wb, rb = x["write_bandwidth_bytes_per_s"], x["read_bandwidth_bytes_per_s"]
    write_s = res.step("write time", "t_w = bytes / B_write", f"{fmt_bytes(first(total))} / {num(first(wb) / 1e9)} GB/s", total / wb, "s")
    restore_s = res.step("restore time", "t_r = bytes / B_read", f"{fmt_bytes(first(total))} / {num(first(rb) / 1e9)} GB/s", total / rb, "s")
    pause = (np.asarray(req.blocking_s) + 0.0 * write_s) if req.blocking_s is not None else write_s
    o.update(write_s=out(write_s), restore_s=out(restore_s), save_plus_restore_s=out(write_s + restore_s),
             pause_s=out(pause), durable_after_s=out(pause + write_s) if req.blocking_s is not None else out(write_s))
    if req.blocking_s is not None:
        res.assume(f"Asynchronous save: training pauses {fmt_s(req.blocking_s)} to snapshot, then the upload runs in the "
                   "background; the checkpoint is durable only after pause + write time.")
    if req.interval_s is not None:
        tau = x["interval_s"]
        gen = res.step("state generation rate", "bytes / interval", f"{fmt_bytes(first(total))} / {fmt_s(first(tau))}", total / tau, "B/s")
        backlog = np.maximum(gen - wb, 0.0)
        o.update(generation_bytes_per_s=out(gen), backlog_growth_bytes_per_s=out(backlog),
                 keeps_up=out(backlog <= 0) if np.ndim(backlog) else bool(backlog <= 0),
                 overhead_fraction=out(pause / tau))
        res.step("backlog growth", "max(0, rate − B_write)", f"{num(first(gen) / 1e9)} − {num(first(wb) / 1e9)} GB/s", backlog, "B/s")
    if req.mtbf_s is not None:
        M = x["mtbf_s"]
        young = res.step("Young interval", "τ = √(2·C·MTBF)", f"√(2 × {fmt_s(first(pause))} × {fmt_s(first(M))})", np.sqrt(2 * pause * M), "s")
        with np.errstate(invalid="ignore"):
            r = np.sqrt(pause / (2 * M))
            daly = np.where(pause < 2 * M, np.sqrt(2 * pause * M) * (1 + r / 3 + (pause / (2 * M)) / 9) - pause, M)
        o.update(young_interval_s=out(young), daly_interval_s=out(daly))
        tau = x["interval_s"] if req.interval_s is not None else young
        lost = res.step("expected lost work per failure", "τ/2 + restore", f"{fmt_s(first(tau))}/2 + {fmt_s(first(restore_s))}",
                        tau / 2 + restore_s, "s")
        waste = pause / tau + (tau / 2 + restore_s) / M
        o.update(interval_used_s=out(tau), expected_lost_work_s=out(lost), expected_waste_fraction=out(waste))
        res.assume("Failures arrive at random (exponential, first order): on average half an interval of work is lost, "
                   "plus the restore; Daly's refinement adds higher-order terms for C comparable to MTBF.")
    res.outputs = o
    res.headline = _headline(req, o, rec)
    return res


def _headline(req: CheckpointRequest, o: dict, rec: dict | None) -> str:
    """Checkpoint size, write time, cost of the interval (a sweep: its first point)."""
    n = hf.n_points(req.params, req.write_bandwidth_bytes_per_s, req.read_bandwidth_bytes_per_s, req.interval_s, req.mtbf_s)
    who = f"{hf.name_of(rec)} ({hf.fmt_big(o.get('params'))} parameters)" if rec is not None else \
        f"{hf.fmt_big(o.get('params'))} parameters"
    text = (f"A checkpoint of {who} is {hf.fmt_bytes(o.get('checkpoint_bytes'))} "
            f"({hf.fmt_num(o.get('bytes_per_param'))} bytes per parameter)")
    if o.get("write_s") is not None:
        text += (f" and takes {hf.fmt_seconds(o['write_s'])} to write at {hf.fmt_rate(req.write_bandwidth_bytes_per_s)}, "
                 f"{hf.fmt_seconds(o.get('restore_s'))} to restore")
    if o.get("overhead_fraction") is not None:
        keeps = hf.first_value(o.get("keeps_up"))
        text += (f"; saving every {hf.fmt_seconds(req.interval_s)} costs {hf.fmt_pct(o['overhead_fraction'])} of training time "
                 f"in pauses{'' if keeps else ' and the writes fall behind'}")
    if o.get("young_interval_s") is not None:
        text += (f"; with a failure every {hf.fmt_seconds(req.mtbf_s)} the Young interval is {hf.fmt_seconds(o['young_interval_s'])} "
                 f"and {hf.fmt_pct(o.get('expected_waste_fraction'))} of time is expected to be wasted")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


#: a number, or one per point when an input is swept (null where not finite)


class CheckpointOutputs(Outputs):
    """Outputs of checkpoint; lists where an input is swept. Times need `write_bandwidth_bytes_per_s`."""

    params: OutSweep = Field(description="Parameter count N (given, or the model's params_total).")
    bytes_per_param: float | None = Field(description="Bytes saved per parameter: the sum of the parts, or "
                                   "state_bytes_per_param, B.")
    weights_bytes: OutSweep = Field(None, description="N × weight bytes, B (when the parts are given).")
    master_bytes: OutSweep = Field(None, description="N × master-copy bytes, B (when the parts are given).")
    optimizer_bytes: OutSweep = Field(None, description="N × optimizer-state bytes, B (when the parts are given).")
    gradients_bytes: OutSweep = Field(None, description="N × gradient bytes, B (when the parts are given).")
    checkpoint_bytes: OutSweep = Field(description="Size of one checkpoint, N × bytes/param + extra, B.")
    write_s: OutSweep = Field(None, description="Time to write it at the write bandwidth, s.")
    restore_s: OutSweep = Field(None, description="Time to read it back at the read bandwidth, s.")
    save_plus_restore_s: OutSweep = Field(None, description="write_s + restore_s, s.")
    pause_s: OutSweep = Field(None, description="Training pause per checkpoint, s: blocking_s when saving is "
                                   "asynchronous, else the whole write.")
    durable_after_s: OutSweep = Field(None, description="Time from the start of a save until it is on durable "
                                           "storage, s (pause + write when asynchronous).")
    generation_bytes_per_s: OutSweep = Field(None, description="Checkpoint bytes produced per second of training, "
                                                  "bytes / interval, B/s (with interval_s).")
    backlog_growth_bytes_per_s: OutSweep = Field(None, description="How fast unwritten checkpoints pile up, "
                                                      "max(0, generation − write bandwidth), B/s (with interval_s).")
    keeps_up: bool | list[bool] | None = Field(None, description="Writes keep up with the interval (no backlog growth; "
                                               "with interval_s).")
    overhead_fraction: OutSweep = Field(None, description="Share of training time spent paused for saves, "
                                             "pause / interval (with interval_s).")
    young_interval_s: OutSweep = Field(None, description="Young's interval √(2·pause·MTBF), s (with mtbf_s).")
    daly_interval_s: OutSweep = Field(None, description="Daly's higher-order interval, s (with mtbf_s).")
    interval_used_s: OutSweep = Field(None, description="Interval the waste is computed at: interval_s, else the "
                                           "Young interval, s (with mtbf_s).")
    expected_lost_work_s: OutSweep = Field(None, description="Work lost per failure, half an interval plus the "
                                                "restore, s (with mtbf_s).")
    expected_waste_fraction: OutSweep = Field(None, description="Expected share of time lost to pauses and "
                                                   "failures, pause / τ + (τ/2 + restore) / MTBF (with mtbf_s).")


CALCULATORS = [
    Calculator(
        name="checkpoint",
        profile=Profile(1e-06, 646, 304),
        family="checkpoint",
        title="Checkpoint size, save time and interval",
        summary="Bytes of weights + FP32 master + Adam moments, time to write and restore at a storage bandwidth, "
                "whether periodic saves keep up, the Young/Daly interval √(2·C·MTBF) and the expected lost work.",
        description="Bytes = N × (weights + master + optimizer + gradients) + extra (mixed-precision Adam: 2 + 4 + 8 = "
                    "14 B/param). t_w = bytes/B_write, t_r = bytes/B_read. Periodic saves generate bytes/interval; "
                    "above B_write the upload queue grows. Young: τ = √(2·C·MTBF) with C the training pause per save; "
                    "lost work per failure ≈ τ/2 + restore.",
        request_model=CheckpointRequest,
        compute=compute,
        outputs_model=CheckpointOutputs,
        example={"model": "qwen3-8b", "write_bandwidth_bytes_per_s": 8e9, "interval_s": [10, 20, 600], "mtbf_s": 86400},
        cases=("checkpoint-layout-and-loading", "inference-training-scenarios"),
        sweepable=("params", "write_bandwidth_bytes_per_s", "read_bandwidth_bytes_per_s", "interval_s", "mtbf_s"),
        chart=Chart(x="interval_s", y=("backlog_growth_bytes_per_s",), x_label="interval (s)", y_label="backlog growth (B/s)"),
    ),
]

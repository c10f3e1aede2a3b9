"""`rl-recovery`: work redone after a trainer failure with and without keeping trajectories, checkpoint overhead and
the Young/Daly interval, and redo time of preempted rollouts (migrating partial responses, trimming a batch to its
shortest saved output).
"""
from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, fmt_s, Lookup, NonNegFloat, NonNegInt, num, Outputs, PosFloat,
    request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.families.training._rl import join as _join, rl_out as _out

class TrainerFailure(CalcRequest):
    rollout_s: NonNegFloat = Field(description="Rollout phase of a round, seconds.", examples=[300])
    train_s: NonNegFloat = Field(description="Training update of a round, seconds.", examples=[60])
    fail_after_s: NonNegFloat = Field(description="How far into the update the trainer fails, seconds.", examples=[30])
    detect_s: NonNegFloat = Field(0.0, description="Time to detect the failure, seconds.", examples=[20])
    restore_s: NonNegFloat = Field(0.0, description="Time to restore from the last checkpoint, seconds.", examples=[80])
    checkpoint_s: NonNegFloat = Field(0.0, description="Blocking checkpoint time per round, seconds.", examples=[3])


class CheckpointInterval(CalcRequest):
    interval_s: PosFloat = Field(description="Time between checkpoints, seconds.", examples=[1800])
    cost_s: NonNegFloat = Field(description="Blocking time of one checkpoint, seconds.", examples=[30])
    restart_s: NonNegFloat = Field(0.0, description="Detect + restore time after a failure, seconds.", examples=[300])
    mtbf_s: PosFloat = Field(description="Mean time between failures of the whole job, seconds.", examples=[86400])


class Preemption(CalcRequest):
    received_tokens: list[NonNegInt] = Field(min_length=1, max_length=100_000, description="Output tokens already generated per preempted request.", examples=[[4000, 1000]])
    decode_tokens_per_s: PosFloat = Field(description="Decode rate of one request, tokens/s.", examples=[80])
    prefix_prepare_s: NonNegFloat = Field(0.0, description="Extra time to re-prefill the kept output on the new instance, seconds.", examples=[2])
    handoff_s: NonNegFloat = Field(0.0, description="Time to hand the partial response over, seconds.", examples=[1])


class RlRecoveryRequest(CalcRequest):
    failure: TrainerFailure | None = None
    checkpoint: CheckpointInterval | None = None
    preemption: Preemption | None = None


class RlRecoveryFailureOut(Outputs):
    """A trainer failure during the update: redo the whole round, or keep the round's trajectories."""

    whole_round_redo_s: float | None = Field(description="Lost work + detect + restore + rollout + train again, s.")
    keep_trajectories_s: float | None = Field(description="Lost work + detect + restore + train again, s.")
    saved_s: float | None = Field(description="Time keeping the trajectories saves (one rollout), s.")
    checkpoint_overhead_fraction: float | None = Field(description="Blocking checkpoint / round time (null for an "
                                                       "empty round).")


class RlRecoveryCheckpointOut(Outputs):
    """Checkpoint interval against the mean time between failures (first-order Young/Daly)."""

    overhead_fraction: float | None = Field(description="Checkpoint cost / interval, a fraction.")
    expected_lost_work_per_failure_s: float | None = Field(description="interval / 2 + restart, s.")
    expected_waste_fraction: float | None = Field(description="C/τ + (τ/2 + R)/MTBF, a fraction of time.")
    young_interval_s: float | None = Field(description="√(2 · cost · MTBF), s.")
    waste_fraction_at_young: float | None = Field(description="The waste fraction at the Young interval.")


class RlRecoveryPreemptionOut(Outputs):
    """Preempted rollouts: redo from scratch, migrate the partial responses, or trim a batch to its shortest."""

    redo_from_scratch_s: list[float | None] = Field(description="Per request, received tokens / decode rate, s.")
    migration_overhead_s: float | None = Field(description="Prefix prepare + hand-off, s.")
    migration_saved_s: list[float | None] = Field(description="Per request, redo − migration overhead, s.")
    batch_trim_kept_tokens: int = Field(description="Tokens every request keeps when the batch is trimmed to its "
                                        "shortest saved output, tokens.")
    batch_trim_redo_tokens: list[int] = Field(description="Per request, tokens redone after trimming, tokens.")
    batch_trim_redo_s: float | None = Field(description="Most tokens redone / decode rate: the batch's redo time, s.")
    batch_trim_redo_token_total: int | float | None = Field(description="Tokens redone over the batch (a whole count, a "
                                                     "float past 2^53).")


class RlRecoveryOutputs(Outputs):
    """Outputs of rl-recovery: one object per section given."""

    failure: RlRecoveryFailureOut | None = Field(None, description="Recovery from a failed update (with failure).")
    checkpoint: RlRecoveryCheckpointOut | None = Field(None, description="Checkpoint overhead and the Young interval "
                                                       "(with checkpoint).")
    preemption: RlRecoveryPreemptionOut | None = Field(None, description="Redo of preempted rollouts (with "
                                                       "preemption).")


def compute_recovery(req: RlRecoveryRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    o: dict = {}
    if req.failure is not None:
        f = req.failure
        if f.fail_after_s > f.train_s:
            raise CalcInputError(("failure", "fail_after_s"), "the failure must happen during the update")
        lost = f.rollout_s + f.fail_after_s + f.detect_s + f.restore_s
        whole = lost + f.rollout_s + f.train_s
        keep = lost + f.train_s
        res.step("redo the whole round", "rollout + failed part + detect + restore + rollout + train",
                 f"{num(f.rollout_s)} + {num(f.fail_after_s)} + {num(f.detect_s)} + {num(f.restore_s)} + {num(f.rollout_s)} + {num(f.train_s)}", whole, "s")
        res.step("keep the trajectories", "rollout + failed part + detect + restore + train",
                 f"{num(f.rollout_s)} + {num(f.fail_after_s)} + {num(f.detect_s)} + {num(f.restore_s)} + {num(f.train_s)}", keep, "s")
        rnd = f.rollout_s + f.train_s
        o["failure"] = {"whole_round_redo_s": whole, "keep_trajectories_s": keep, "saved_s": whole - keep,
                        "checkpoint_overhead_fraction": f.checkpoint_s / rnd if rnd > 0 else None}
    if req.checkpoint is not None:
        c = req.checkpoint
        waste = c.cost_s / c.interval_s + (c.interval_s / 2 + c.restart_s) / c.mtbf_s
        young = math.sqrt(2 * c.cost_s * c.mtbf_s)
        waste_y = (c.cost_s / young + (young / 2 + c.restart_s) / c.mtbf_s) if young > 0 else c.restart_s / c.mtbf_s
        res.step("expected waste fraction", "C/τ + (τ/2 + R)/MTBF", f"{num(c.cost_s)}/{num(c.interval_s)} + ({num(c.interval_s)}/2 + {num(c.restart_s)})/{num(c.mtbf_s)}", waste, "")
        res.step("Young interval", "τ* = √(2 C MTBF)", f"√(2 × {num(c.cost_s)} × {num(c.mtbf_s)})", young, "s")
        o["checkpoint"] = {"overhead_fraction": c.cost_s / c.interval_s, "expected_lost_work_per_failure_s": c.interval_s / 2 + c.restart_s,
                           "expected_waste_fraction": waste, "young_interval_s": young, "waste_fraction_at_young": waste_y}
    if req.preemption is not None:
        p = req.preemption
        r = np.asarray(p.received_tokens, dtype=float)
        redo = r / p.decode_tokens_per_s
        mig = p.prefix_prepare_s + p.handoff_s
        kept = float(r.min())
        trim_redo = r - kept
        res.step("redo from scratch", "tokens received / decode rate", f"{num(r[0])} / {num(p.decode_tokens_per_s)}", redo, "s")
        res.step("saved by migrating the partial response", "redo − (prefix prepare + hand-off)", f"{fmt_s(redo[0])} − {fmt_s(mig)}", redo - mig, "s")
        res.step("batch resume: trim to the shortest", "(received − min received) / rate", f"max {num(trim_redo.max())} tokens / {num(p.decode_tokens_per_s)}",
                 trim_redo.max() / p.decode_tokens_per_s, "s")
        o["preemption"] = {"redo_from_scratch_s": _out(redo), "migration_overhead_s": mig,
                           "migration_saved_s": _out(redo - mig),
                           "batch_trim_kept_tokens": kept, "batch_trim_redo_tokens": _out(trim_redo),
                           "batch_trim_redo_s": float(trim_redo.max() / p.decode_tokens_per_s),
                           "batch_trim_redo_token_total": float(trim_redo.sum())}
    if not o:
        raise CalcInputError("failure", "give at least one of failure, checkpoint, preemption")
    res.outputs = _out(o)
    res.assume(
        "Failure: the previous checkpoint is durable, the round's trajectories are stored off the failed machine and "
        "the failed update was not committed.",
        "Checkpoint interval: failures are independent with the given mean time between failures; the Young "
        "interval √(2·C·MTBF) is first-order (valid when C ≪ MTBF).",
        "Preemption: the new instance re-prefills the prompt plus the kept output (no KV is inherited); trimming a batch "
        "to its shortest saved output redoes the rest in parallel, so the slowest request sets the time.",
    )
    res.headline = _recovery_headline(res.outputs)
    return res


def _recovery_headline(o: dict) -> str:
    """What each recovery strategy saves (each section given)."""
    parts = []
    f = o.get("failure")
    if isinstance(f, dict):
        parts.append(f"Keeping the trajectories after a failed update recovers in {hf.fmt_seconds(f.get('keep_trajectories_s'))} "
                     f"instead of {hf.fmt_seconds(f.get('whole_round_redo_s'))}, saving {hf.fmt_seconds(f.get('saved_s'))}")
    c = o.get("checkpoint")
    if isinstance(c, dict):
        parts.append(f"checkpointing wastes {hf.fmt_pct(c.get('expected_waste_fraction'))} of time at the given interval and "
                     f"{hf.fmt_pct(c.get('waste_fraction_at_young'))} at the Young interval of {hf.fmt_seconds(c.get('young_interval_s'))}")
    p = o.get("preemption")
    if isinstance(p, dict):
        parts.append(f"migrating a preempted response saves {hf.fmt_seconds(p.get('migration_saved_s'))} of "
                     f"{hf.fmt_seconds(p.get('redo_from_scratch_s'))} redo for the first request")
    return _join(parts) or hf.sentence("No section was computed")


CALCULATORS = [


    Calculator(
        name="rl-recovery",
        family="rl",
        title="RL recovery: failures, checkpoints, preempted rollouts",
        summary="Time redone after a trainer failure with and without keeping the round's trajectories, checkpoint "
                "overhead and interval, and the redo time of preempted rollouts (migrate vs restart vs batch trim).",
        description="Whole-round redo = rollout + failed part + detect + restore + rollout + train; keeping trajectories "
                    "drops the second rollout. Expected waste = C/τ + (τ/2 + R)/MTBF with the Young interval √(2·C·MTBF). "
                    "A preempted request restarted from scratch redoes tokens / rate; migrating the partial response costs "
                    "the prefix re-prefill and hand-off instead; a batch resumed at its shortest saved output redoes the rest.",
        request_model=RlRecoveryRequest,
        compute=compute_recovery,
        outputs_model=RlRecoveryOutputs,
        example={"failure": {"rollout_s": 300, "train_s": 60, "fail_after_s": 30, "detect_s": 20, "restore_s": 80, "checkpoint_s": 3},
                 "checkpoint": {"interval_s": 1800, "cost_s": 30, "restart_s": 300, "mtbf_s": 86400},
                 "preemption": {"received_tokens": [8000, 4000, 1000], "decode_tokens_per_s": 80, "prefix_prepare_s": 2, "handoff_s": 1}},
        cases=("rl-scheduling-and-recovery", "preemptible-rollout-and-weight-readiness"),
    ),
]

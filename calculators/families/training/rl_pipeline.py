"""Reinforcement-learning pipelines: supply and demand, co-scheduling, recovery, rollout tails, ratios.

Four calculators of the `rl` family:

* `rl-pipeline`: generator → verifier → learner rates and which one bounds accepted samples/s,
  weight-sync time per update, co-scheduling cycles of jobs whose phases own GPU pools (split
  pools or the same GPUs), host memory for parked states, the device-memory peak of a phase
  switch, the GPU-seconds of making trainers wait, and the cost break-even of extra rollout
  instances.
* `rl-recovery`: work redone after a trainer failure with and without keeping trajectories,
  checkpoint overhead and the Young/Daly interval, and redo time of preempted rollouts
  (migrating partial responses, trimming a batch to its shortest saved output).
* `rl-rollout-tail`: long-tail rollouts: expected batch wall time with stragglers, racing copies
  and the bias it adds, and over-sampling counts.
* `rl-policy-ratio`: importance ratios between the current, old (proximal) and behaviour policies
  from log-probabilities, and what clipping sees.
"""
from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    request_inputs,
    GIB, CalcInputError, CalcRequest, Fraction, FractionSweep, Lookup, NonNegFloat, NonNegInt, PosFloat,
    PosFloatSweep, PosInt, Result, broadcast, first, fmt_bytes, fmt_s, num, out,
)
from calculators.framework import headline as hf
from calculators.framework import Calculator, Chart


def _out(x):
    """`out`, with a fast path for finite numeric arrays (large sweeps)."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "fiu" and np.isfinite(x).all():
        return x.tolist()
    return out(x)

# --------------------------------------------------------------------------- rl-pipeline

class WeightSync(CalcRequest):
    """Pushing new weights from the learner to the generators after every update."""

    weight_bytes: PosFloat = Field(description="Bytes sent per update (the generator's copy of the weights).", examples=[16.4e9])
    bytes_per_s: PosFloat = Field(description="Effective bandwidth of the sync path, bytes/s (one way, per receiver if broadcast in parallel).", examples=[50e9])
    fixed_s: NonNegFloat = Field(0.0, description="Fixed cost per sync (pause, reload, cache reset), seconds.")
    samples_per_update: PosFloat | None = Field(None, description="Accepted samples consumed by one learner update; gives the update interval.", examples=[1024])


class Phase(CalcRequest):
    pool: str = Field(min_length=1, max_length=60, description="GPU pool this phase runs on (e.g. `rollout`, `train`, or one shared `gpus`).")
    duration_s: NonNegFloat = Field(description="Phase time per cycle on its pool, seconds.")


class Job(CalcRequest):
    name: str = Field(min_length=1, max_length=60)
    phases: list[Phase] = Field(min_length=1, max_length=16, description="Phases in dependency order (rollout, then train ...).")
    host_state_bytes: NonNegFloat = Field(0.0, description="Host memory holding this job's parked state while it is switched out.")


class Mix(CalcRequest):
    label: str | None = Field(None, max_length=100)
    counts: dict[str, Annotated[int, Field(ge=0, le=10**6)]] = Field(max_length=50, description="How many copies of each job (by name) share the pools.")
    switch_s: NonNegFloat | None = Field(None, description="Override of the switch time per phase for this mix.")


class CoSchedule(CalcRequest):
    """Jobs whose phases each own a pool; a cycle runs every phase of every job once."""

    jobs: list[Job] = Field(min_length=1, max_length=50)
    mixes: list[Mix] = Field(min_length=1, max_length=50, description="Combinations of jobs to test.")
    switch_s: NonNegFloat = Field(0.0, description="Time to switch a pool from one job's phase to another's, seconds (paid per phase when a pool is shared).")
    slowdown_allowance: Annotated[float, Field(ge=0, le=100, allow_inf_nan=False)] = Field(0.0, description="Allowed cycle growth over the slowest job alone (0.1 = 10 %).")
    host_memory_bytes: PosFloat | None = Field(None, description="Host memory available for parked states.")
    host_reserve_bytes: NonNegFloat = Field(0.0, description="Host memory kept free for everything else.")


class PhaseMemory(CalcRequest):
    """Device memory when one GPU switches between training and rollout."""

    train_state_bytes: NonNegFloat = Field(description="Training state on the device (weights, gradients, optimizer).", examples=[40 * GIB])
    weights_bytes: NonNegFloat = Field(description="Inference weights of the rollout engine.", examples=[16381470720])
    kv_bytes: NonNegFloat = Field(description="KV cache pool of the rollout engine.", examples=[24 * GIB])
    runtime_bytes: NonNegFloat = Field(0.0, description="Runtime, allocator and workspace present in both phases.", examples=[4 * GIB])
    device_memory_bytes: PosFloat | None = Field(None, description="Device memory budget.", examples=[64 * GIB])


class IdleWait(CalcRequest):
    """Making a training group wait to save work elsewhere."""

    waiting_gpus: PosInt = Field(description="GPUs that sit idle while waiting.", examples=[64])
    wait_s: NonNegFloat = Field(description="Extra wait, seconds.", examples=[2])
    saved_gpu_s: NonNegFloat = Field(description="GPU-seconds saved elsewhere by waiting (e.g. in the verifier).", examples=[60])


class ExtraRollout(CalcRequest):
    """Renting extra rollout instances next to the training instance."""

    base_usd_per_h: PosFloat = Field(description="Hourly price of the training instance, USD.", examples=[83.79])
    extra_usd_per_h: PosFloat = Field(description="Hourly price of one extra rollout instance, USD.", examples=[5.32])
    extra_instances: NonNegInt = Field(description="Extra instances, billed all the time.", examples=[6])
    throughput_multipliers: list[PosFloat] = Field(default_factory=list, max_length=100, description="Training throughput with the extras relative to without.", examples=[[1.2, 1.6]])


class RlPipelineRequest(CalcRequest):
    """Rates of the RL loop and the optional sections below."""

    generator_samples_per_s: PosFloatSweep | None = Field(None, description="Trajectories/s the generators (rollout) can produce. Sweepable.", examples=[12])
    verifier_samples_per_s: PosFloat | None = Field(None, description="Trajectories/s the verifiers / reward models can score (unset = no separate verifier).", examples=[6])
    learner_samples_per_s: PosFloat | None = Field(None, description="Trajectories/s the learner can train on.", examples=[8])
    reject_fraction: Fraction = Field(0.0, description="Share of verified trajectories dropped before training (failed checks, stale versions).", examples=[0.25])
    weight_sync: WeightSync | None = None
    coschedule: CoSchedule | None = None
    phase_memory: PhaseMemory | None = None
    idle_wait: IdleWait | None = None
    extra_rollout: ExtraRollout | None = None


def compute_pipeline(req: RlPipelineRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    o: dict = {}
    if req.generator_samples_per_s is not None or req.learner_samples_per_s is not None:
        if req.generator_samples_per_s is None or req.learner_samples_per_s is None:
            raise CalcInputError("learner_samples_per_s" if req.generator_samples_per_s is not None else "generator_samples_per_s",
                                 "supply and demand need both generator and learner rates")
        g = broadcast({"generator_samples_per_s": req.generator_samples_per_s})["generator_samples_per_s"]
        v = req.verifier_samples_per_s
        lr = req.learner_samples_per_s
        keep = 1.0 - req.reject_fraction
        upstream = np.minimum(g, v) if v is not None else g
        res.step("verified supply", "min(generator, verifier)" if v is not None else "generator",
                 f"min({num(first(g))}, {num(v)})" if v is not None else num(first(g)), upstream, "samples/s")
        admitted = upstream * keep
        res.step("admitted supply", "verified × (1 − reject)", f"{num(first(upstream))} × (1 − {num(req.reject_fraction)})", admitted, "samples/s")
        acc = res.step("accepted samples/s (stable upper bound)", "min(learner, admitted)", f"min({num(lr)}, {num(first(admitted))})",
                       np.minimum(lr, admitted), "samples/s")
        names = np.array(["generator", "verifier", "learner"])
        if keep > 0:
            # capacities in admitted samples/s: a stage bounds when its capacity is the smallest
            vcap = np.full(np.shape(g), v * keep if v is not None else np.inf)
            caps = np.stack([g * keep, vcap, np.full(np.shape(g), float(lr))])
            bound = names[np.argmin(caps, axis=0)]
        else:
            bound = np.full(np.shape(g), "reject_fraction")
        flow = acc / keep if keep > 0 else upstream  # rate each upstream stage must sustain
        o["supply"] = {
            "accepted_samples_per_s": _out(acc), "verified_samples_per_s": _out(upstream),
            "admitted_samples_per_s": _out(admitted), "bound": _out(bound) if np.ndim(bound) else str(bound),
            "generator_utilization": _out(flow / g),
            "verifier_utilization": _out(flow / v) if v is not None else None,
            "learner_utilization": _out(acc / lr),
            "excess_generation_per_s": _out(g - flow),
        }
    if req.weight_sync is not None:
        ws = req.weight_sync
        t = ws.fixed_s + ws.weight_bytes / ws.bytes_per_s
        res.step("weight sync per update", "fixed + bytes / bandwidth", f"{fmt_s(ws.fixed_s)} + {num(ws.weight_bytes)} B / {num(ws.bytes_per_s)} B/s", t, "s")
        sync = {"sync_s": t}
        if ws.samples_per_update is not None and "supply" in o:
            with np.errstate(divide="ignore"):
                interval = ws.samples_per_update / np.asarray(o["supply"]["accepted_samples_per_s"], dtype=float)
            sync["update_interval_s"] = _out(interval)
            sync["sync_share_if_exposed"] = _out(t / (interval + t))
        o["weight_sync"] = sync
    if req.coschedule is not None:
        o["coschedule"] = _coschedule(req.coschedule, res)
    if req.phase_memory is not None:
        pm = req.phase_memory
        train = pm.train_state_bytes + pm.runtime_bytes
        roll = pm.weights_bytes + pm.kv_bytes + pm.runtime_bytes
        naive = pm.train_state_bytes + pm.weights_bytes + pm.kv_bytes + pm.runtime_bytes
        staged = max(pm.train_state_bytes + pm.weights_bytes + pm.runtime_bytes, roll)
        res.step("naive switch peak", "state + W + KV + runtime (everything resident at once)", fmt_bytes(naive), naive, "B")
        res.step("staged switch peak", "max(state + W + runtime, W + KV + runtime): load W, sync, drop state, then KV", fmt_bytes(staged), staged, "B")
        pmo = {"train_only_bytes": train, "rollout_only_bytes": roll, "naive_peak_bytes": naive, "staged_peak_bytes": staged}
        if pm.device_memory_bytes is not None:
            pmo.update({"naive_fits": naive <= pm.device_memory_bytes, "staged_fits": staged <= pm.device_memory_bytes,
                        "staged_headroom_bytes": pm.device_memory_bytes - staged})
        o["phase_memory"] = pmo
    if req.idle_wait is not None:
        iw = req.idle_wait
        extra = iw.waiting_gpus * iw.wait_s
        res.step("GPU-seconds of waiting", "GPUs × wait", f"{iw.waiting_gpus} × {num(iw.wait_s)} s", extra, "GPU·s")
        o["idle_wait"] = {"extra_gpu_s": extra, "net_gpu_s": extra - iw.saved_gpu_s, "worth_it": extra < iw.saved_gpu_s}
    if req.extra_rollout is not None:
        er = req.extra_rollout
        total = er.base_usd_per_h + er.extra_instances * er.extra_usd_per_h
        be = total / er.base_usd_per_h
        res.step("hourly cost with extras", "base + n × extra", f"{num(er.base_usd_per_h)} + {er.extra_instances} × {num(er.extra_usd_per_h)}", total, "USD/h")
        res.step("break-even throughput multiplier", "total / base", f"{num(total)} / {num(er.base_usd_per_h)}", be, "×")
        o["extra_rollout"] = {"total_usd_per_h": total, "break_even_multiplier": be,
                              "cost_per_work_ratio": [be / x for x in er.throughput_multipliers]}
    if not o:
        raise CalcInputError("generator_samples_per_s", "give the rates or at least one section")
    res.outputs = o
    res.assume(
        "Rates are sustained averages; the accepted rate is an upper bound: queues, bursts and version lag lower it, and "
        "adding capacity to a stage that does not bound only grows its queue.",
        "Trajectories are counted as equal units; long and short ones are different token work.",
    )
    if req.coschedule is not None:
        res.assume("Co-scheduling: each phase owns its pool; a cycle is at least the longest job chain and at least the "
                   "busiest pool's total work; a pool shared by several phases pays one switch per phase, and different "
                   "pools switch in parallel. The bound is necessary, not sufficient.")
    res.headline = _pipeline_headline(req, o)
    return res


def _join(parts: list[str]) -> str:
    return hf.sentence("; ".join(p for p in parts if p))


def _pipeline_headline(req: RlPipelineRequest, o: dict) -> str:
    """Accepted samples/s and the bounding stage, then each section's answer (a sweep: its first point)."""
    n = hf.n_points(req.generator_samples_per_s)
    parts = []
    sup = o.get("supply")
    if isinstance(sup, dict):
        parts.append(f"At most {hf.fmt_num(sup.get('accepted_samples_per_s'))} accepted samples/s, bounded by the "
                     f"{hf.first_value(sup.get('bound'))} (generator at {hf.fmt_num(req.generator_samples_per_s)} samples/s)"
                     + (f" (first of {n:,} points)" if n > 1 else ""))
    ws = o.get("weight_sync")
    if isinstance(ws, dict):
        parts.append(f"weight sync takes {hf.fmt_seconds(ws.get('sync_s'))} per update")
    cs = o.get("coschedule")
    if isinstance(cs, dict) and cs.get("mixes"):
        mixes = cs["mixes"]
        ok = [m for m in mixes if m.get("feasible")]
        parts.append(f"{len(ok)} of {len(mixes)} co-scheduled mixes fit the slowdown allowance"
                     + (f" ({', '.join(str(m.get('label')) for m in ok[:3])}{', …' if len(ok) > 3 else ''})" if ok else ""))
    pm = o.get("phase_memory")
    if isinstance(pm, dict):
        text = (f"a train↔rollout switch peaks at {hf.fmt_bytes(pm.get('staged_peak_bytes'))} staged, "
                f"{hf.fmt_bytes(pm.get('naive_peak_bytes'))} naive")
        if "staged_fits" in pm:
            text += " (staged fits)" if pm["staged_fits"] else " (staged does not fit)"
        parts.append(text)
    iw = o.get("idle_wait")
    if isinstance(iw, dict):
        parts.append(f"waiting costs {hf.fmt_num(iw.get('extra_gpu_s'))} GPU·s and is "
                     f"{'worth it' if iw.get('worth_it') else 'not worth it'}")
    er = o.get("extra_rollout")
    if isinstance(er, dict):
        parts.append(f"extra rollout instances pay off above {hf.fmt_num(er.get('break_even_multiplier'))}× throughput "
                     f"({hf.fmt_usd(er.get('total_usd_per_h'))}/h in all)")
    return _join(parts) or hf.sentence("No section was computed")


def _coschedule(cs: CoSchedule, res: Result) -> dict:
    jobs = {j.name: j for j in cs.jobs}
    if len(jobs) != len(cs.jobs):
        raise CalcInputError(("coschedule", "jobs"), "job names must be unique")
    solo = {j.name: sum(p.duration_s for p in j.phases) for j in cs.jobs}
    mixes = []
    for i, m in enumerate(cs.mixes):
        for name in m.counts:
            if name not in jobs:
                raise CalcInputError(("coschedule", "mixes", i, "counts", name), f"no job named {name!r}")
        present = {n: c for n, c in m.counts.items() if c > 0}
        if not present:
            raise CalcInputError(("coschedule", "mixes", i, "counts"), "a mix needs at least one job")
        sw = cs.switch_s if m.switch_s is None else m.switch_s
        load: dict[str, float] = {}
        phases: dict[str, int] = {}
        for n, c in present.items():
            for p in jobs[n].phases:
                load[p.pool] = load.get(p.pool, 0.0) + c * p.duration_s
                phases[p.pool] = phases.get(p.pool, 0) + c
        for pool, k in phases.items():
            if k > 1:
                load[pool] += k * sw
        chain = max(solo[n] for n in present)
        cycle = max(chain, max(load.values()))
        target = chain * (1.0 + cs.slowdown_allowance)
        host = sum(jobs[n].host_state_bytes * c for n, c in present.items()) + cs.host_reserve_bytes
        item = {"label": m.label or " + ".join(f"{c}×{n}" for n, c in present.items()),
                "pool_load_s": load, "longest_chain_s": chain, "cycle_lower_bound_s": cycle,
                "allowed_cycle_s": target, "feasible": cycle <= target + 1e-12,
                "bound": "chain" if chain >= max(load.values()) else f"pool {max(load, key=load.get)}",
                "host_need_bytes": host}
        if cs.host_memory_bytes is not None:
            item["host_fits"] = host <= cs.host_memory_bytes
        mixes.append(item)
        res.step(f"cycle of {item['label']}", "max(longest job chain, max_pool Σ phases + switches)",
                 f"max({num(chain)}, {', '.join(f'{k} {num(v)}' for k, v in load.items())})", cycle, "s")
    return {"solo_cycle_s": solo, "mixes": mixes}


# --------------------------------------------------------------------------- rl-recovery

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


# --------------------------------------------------------------------------- rl-rollout-tail

#: Over-sampling factor: at least 1 (no over-sampling), at most 100× the wanted count.
OversampleFactor = Annotated[float, Field(ge=1, le=100, allow_inf_nan=False)]


class Oversample(CalcRequest):
    prompts: Annotated[int, Field(ge=1, le=10**9)] = Field(description="Prompts per step wanted (at most 1e9).", examples=[128])
    responses_per_prompt: Annotated[int, Field(ge=1, le=10**4)] = Field(description="Responses per prompt wanted (a group; at most 10,000).", examples=[8])
    prompt_factor: OversampleFactor = Field(1.0, description="Over-sampling factor on prompts, 1 to 100.", examples=[1.25])
    response_factor: OversampleFactor = Field(1.0, description="Over-sampling factor on responses per prompt, 1 to 100.", examples=[1.25])


class RolloutTailRequest(CalcRequest):
    long_fraction: FractionSweep | None = Field(None, description="Probability that a rollout is a long one (straggler). Sweepable.", examples=[0.5])
    short_s: NonNegFloat | None = Field(None, description="Duration of a short rollout, seconds.", examples=[1])
    long_s: NonNegFloat | None = Field(None, description="Duration of a long rollout, seconds.", examples=[10])
    race_copies: Annotated[int, Field(ge=1, le=1024)] = Field(1, description="Copies started per sample (at most 1024); the first to finish is kept and the rest cancelled.", examples=[2])
    batch_size: Annotated[int, Field(ge=1, le=10**9)] = Field(1, description="Rollouts a synchronous step waits for (at most 1e9).", examples=[64])
    oversample: Oversample | None = None


def compute_tail(req: RolloutTailRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    o: dict = {}
    if req.long_fraction is not None:
        if req.short_s is None or req.long_s is None:
            raise CalcInputError("short_s" if req.short_s is None else "long_s", "give both short_s and long_s")
        p = broadcast({"long_fraction": req.long_fraction})["long_fraction"]
        s, l, r, n = req.short_s, req.long_s, req.race_copies, req.batch_size
        single = res.step("expected rollout time", "p × long + (1 − p) × short", f"{num(first(p))} × {num(l)} + (1 − {num(first(p))}) × {num(s)}", p * l + (1 - p) * s, "s")
        kept_long = p ** r
        race = res.step("expected time with racing copies", "long × p^r + short × (1 − p^r)", f"{num(l)} × {num(first(p))}^{r} + {num(s)} × (1 − {num(first(p))}^{r})",
                        l * kept_long + s * (1 - kept_long), "s")
        lo, hi = min(s, l), max(s, l)
        p_hi = p if l >= s else 1 - p
        with np.errstate(divide="ignore"):
            any_hi = np.where(p_hi >= 1, 1.0, -np.expm1(n * np.log1p(-np.where(p_hi >= 1, 0.0, p_hi))))
        batch = res.step("synchronous batch waits for its slowest", "long − (long − short) × (1 − p)^n",
                         f"{num(hi)} − ({num(hi)} − {num(lo)}) × (1 − {num(first(p_hi))})^{n}", lo + (hi - lo) * any_hi, "s")
        o.update({"single_expected_s": _out(single), "race_expected_s": _out(race), "race_slot_s": _out(r * race),
                  "kept_long_fraction": _out(kept_long), "long_fraction_shift": _out(kept_long - p),
                  "batch_expected_wall_s": _out(batch), "batch_idle_fraction": _out(np.where(batch > 0, 1 - single / np.where(batch > 0, batch, 1.0), 0.0)),
                  "probability_batch_has_long": _out(any_hi)})
    if req.oversample is not None:
        ov = req.oversample
        pr = math.ceil(ov.prompts * ov.prompt_factor - 1e-9)
        rp = math.ceil(ov.responses_per_prompt * ov.response_factor - 1e-9)
        sub = pr * rp
        target = ov.prompts * ov.responses_per_prompt
        res.step("submitted rollouts", "ceil(prompts × f_p) × ceil(responses × f_r)", f"{pr} × {rp}", sub, "rollouts")
        o["oversample"] = {"submitted_prompts": pr, "submitted_responses_per_prompt": rp, "submitted": sub,
                           "target": target, "extra_fraction": sub / target - 1}
    if not o:
        raise CalcInputError("long_fraction", "give long_fraction with short_s and long_s, or oversample")
    res.outputs = o
    res.assume(
        "Two rollout lengths (short, long), independent draws; a teaching model of a long tail.",
        "Racing: r copies per sample start together, the first finisher is kept and the others are cancelled at once, so "
        "slot-seconds = r × the winner's time. Keeping the first finisher biases the kept samples toward short ones "
        "(long is kept with probability p^r instead of p).",
        "Slots are not GPU-seconds under continuous batching; cancelled work still used KV and compute until cancelled.",
    )
    res.headline = _tail_headline(req, o)
    return res


def _tail_headline(req: RolloutTailRequest, o: dict) -> str:
    """Expected rollout time with and without racing, and the batch wait (a sweep: its first point)."""
    n = hf.n_points(req.long_fraction)
    parts = []
    if o.get("single_expected_s") is not None:
        text = (f"With {hf.fmt_pct(req.long_fraction)} long rollouts a rollout takes {hf.fmt_seconds(o['single_expected_s'])} "
                f"on average")
        if req.race_copies > 1:
            text += (f", {hf.fmt_seconds(o.get('race_expected_s'))} racing {req.race_copies} copies "
                     f"({hf.fmt_seconds(o.get('race_slot_s'))} of slots)")
        text += (f", and a synchronous batch of {req.batch_size} waits {hf.fmt_seconds(o.get('batch_expected_wall_s'))} "
                 f"({hf.fmt_pct(o.get('batch_idle_fraction'))} idle)")
        if n > 1:
            text += f" (first of {n:,} points)"
        parts.append(text)
    ov = o.get("oversample")
    if isinstance(ov, dict):
        parts.append(f"over-sampling submits {hf.fmt_count(ov.get('submitted'))} rollouts for {hf.fmt_count(ov.get('target'))} "
                     f"wanted ({hf.fmt_pct(ov.get('extra_fraction'))} extra)")
    return _join(parts) or hf.sentence("No section was computed")


# --------------------------------------------------------------------------- rl-policy-ratio

LogP = Annotated[float, Field(ge=-1e4, le=0, allow_inf_nan=False)]


class PolicyRatioRequest(CalcRequest):
    logp_current: LogP | Annotated[list[LogP], Field(min_length=1, max_length=100_000)] = Field(
        description="Log-probability of the sampled token under the policy being trained (π_θ), in [-10000, 0]. Sweepable.", examples=[-3.0])
    logp_behavior: float = Field(ge=-1e4, le=0, description="Log-probability under the policy that generated the sample (μ, recorded at rollout).", examples=[-3.0])
    logp_old: float | None = Field(None, ge=-1e4, le=0, description="Log-probability under the proximal/old policy π_old (recomputed by the trainer), if different from μ.", examples=[-3.25])
    clip_epsilon: Fraction | None = Field(None, description="PPO clip range ε: ratios outside [1 − ε, 1 + ε] are clipped.", examples=[0.2])


def compute_ratio(req: PolicyRatioRequest, lookup: Lookup) -> Result:
    with np.errstate(over="ignore", invalid="ignore"):
        return _ratio(req)


def _ratio(req: PolicyRatioRequest) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    cur = np.asarray(req.logp_current, dtype=float)
    beh = req.logp_behavior
    r_beh = res.step("behaviour ratio", "r = exp(log π_θ − log μ)", f"exp({num(first(cur))} − ({num(beh)}))", np.exp(cur - beh), "")
    o = {"behavior_ratio": _out(r_beh)}
    if req.logp_old is not None:
        old = req.logp_old
        r_up = res.step("update ratio", "r_upd = exp(log π_θ − log π_old)", f"exp({num(first(cur))} − ({num(old)}))", np.exp(cur - old), "")
        # np.exp, not math.exp: a log-probability gap above ~709 overflows float64 to inf (reported as null)
        w = res.step("behaviour correction weight", "w = exp(log π_old − log μ)", f"exp({num(old)} − ({num(beh)}))", np.exp(old - beh), "")
        o.update({"update_ratio": _out(r_up), "behavior_weight": _out(w), "product": _out(r_up * w),
                  "misattributed_ratio": _out(r_up)})
    if req.clip_epsilon is not None:
        eps = req.clip_epsilon
        lo, hi = 1 - eps, 1 + eps
        o["clip_range"] = [lo, hi]
        o["behavior_ratio_clipped"] = _out(np.clip(r_beh, lo, hi))
        o["behavior_ratio_outside"] = _out((r_beh < lo) | (r_beh > hi))
        if req.logp_old is not None:
            r_up = np.exp(cur - req.logp_old)
            o["update_ratio_clipped"] = _out(np.clip(r_up, lo, hi))
            o["update_ratio_outside"] = _out((r_up < lo) | (r_up > hi))
    res.outputs = o
    res.assume(
        "Ratios use per-token log-probabilities; which policy each log-probability belongs to matters: a recomputed "
        "log-probability is π_old, not the behaviour policy μ that sampled the token.",
        "Without clipping r_upd × w equals the behaviour ratio; with clipping the two placements are not equivalent.",
        "A ratio above the float64 range (a log-probability gap over about 709) is reported as null.",
    )
    res.headline = _ratio_headline(req, o)
    return res


def _ratio_headline(req: PolicyRatioRequest, o: dict) -> str:
    """The importance ratio against the behaviour policy, and the update ratio and clipping (a sweep: its first point)."""
    n = hf.n_points(req.logp_current)
    text = (f"The importance ratio against the behaviour policy is {hf.fmt_num(o.get('behavior_ratio'), 4)}"
            f" for log π_θ = {hf.fmt_num(req.logp_current, 4)}")
    if o.get("update_ratio") is not None or req.logp_old is not None:
        text += (f"; against π_old it is {hf.fmt_num(o.get('update_ratio'), 4)}, times a behaviour weight of "
                 f"{hf.fmt_num(o.get('behavior_weight'), 4)}")
    if "behavior_ratio_outside" in o:
        outside = hf.first_value(o["behavior_ratio_outside"])
        text += (f"; with ε = {hf.fmt_num(req.clip_epsilon)} the behaviour ratio is "
                 f"{'clipped to ' + hf.fmt_num(o.get('behavior_ratio_clipped'), 4) if outside else 'inside the clip range'}")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="rl-pipeline",
        family="rl",
        title="RL pipeline: supply and demand, sync, co-scheduling, memory",
        summary="Which of generator, verifier and learner bounds accepted samples/s; weight-sync time per update; "
                "cycle bounds when RL jobs share GPU pools; the device-memory peak of a train↔rollout switch; "
                "idle-wait and extra-instance trade-offs.",
        description="Accepted = min(learner, min(generator, verifier) × (1 − reject)): an upper bound, and capacity added "
                    "to a stage that does not bound only grows a queue. Weight sync = fixed + bytes / bandwidth. "
                    "Co-scheduling: cycle ≥ max(longest job chain, busiest pool's phases + switches). Phase switch: "
                    "naive peak = state + W + KV + runtime; staged = max(state + W, W + KV) + runtime. Extra rollout "
                    "instances pay off when throughput grows by more than (base + n·extra) / base.",
        request_model=RlPipelineRequest,
        compute=compute_pipeline,
        example={"generator_samples_per_s": [4, 6, 8, 10, 12, 16], "verifier_samples_per_s": 6, "learner_samples_per_s": 8,
                 "reject_fraction": 0.25,
                 "coschedule": {"jobs": [{"name": "A", "phases": [{"pool": "rollout", "duration_s": 360}, {"pool": "train", "duration_s": 120}]},
                                         {"name": "B", "phases": [{"pool": "rollout", "duration_s": 120}, {"pool": "train", "duration_s": 360}]}],
                                "mixes": [{"counts": {"A": 1}}, {"counts": {"A": 1, "B": 1}}, {"counts": {"A": 2}}],
                                "slowdown_allowance": 0.1}},
        cases=("rl-state-and-reproducibility", "rl-scheduling-and-recovery", "weight-handoff",
               "reward-deadlines-and-feedback", "preemptible-rollout-and-weight-readiness"),
        sweepable=("generator_samples_per_s",),
        chart=Chart(x="generator_samples_per_s", y=("supply.accepted_samples_per_s",), x_label="generator samples/s", y_label="accepted samples/s"),
    ),
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
        example={"failure": {"rollout_s": 300, "train_s": 60, "fail_after_s": 30, "detect_s": 20, "restore_s": 80, "checkpoint_s": 3},
                 "checkpoint": {"interval_s": 1800, "cost_s": 30, "restart_s": 300, "mtbf_s": 86400},
                 "preemption": {"received_tokens": [8000, 4000, 1000], "decode_tokens_per_s": 80, "prefix_prepare_s": 2, "handoff_s": 1}},
        cases=("rl-scheduling-and-recovery", "preemptible-rollout-and-weight-readiness"),
    ),
    Calculator(
        name="rl-rollout-tail",
        family="rl",
        title="RL rollout tail: stragglers, racing copies, over-sampling",
        summary="Expected wall time of a synchronous rollout batch with a long tail, what racing copies save and the "
                "sampling bias they add, and how many rollouts over-sampling submits.",
        description="Two-point model: a rollout is long with probability p. A batch of n waits for its slowest: E = short "
                    "+ (long − short)·(1 − (1 − p)^n). Racing r copies and keeping the first finisher gives E[min] = long·p^r "
                    "+ short·(1 − p^r) and uses r × that in slot-seconds, but keeps long samples with probability p^r instead "
                    "of p. Over-sampling submits ceil(P·f_p) × ceil(R·f_r) rollouts for a target of P·R.",
        request_model=RolloutTailRequest,
        compute=compute_tail,
        example={"long_fraction": [0.01, 0.05, 0.1, 0.25, 0.5], "short_s": 1, "long_s": 10, "race_copies": 2, "batch_size": 64,
                 "oversample": {"prompts": 128, "responses_per_prompt": 8, "prompt_factor": 1.25, "response_factor": 1.25}},
        cases=("rollout-tail-and-sampling",),
        sweepable=("long_fraction",),
        chart=Chart(x="long_fraction", y=("single_expected_s", "race_expected_s", "batch_expected_wall_s"), x_label="long fraction p", y_label="seconds"),
    ),
    Calculator(
        name="rl-policy-ratio",
        family="rl",
        title="RL policy ratios: behaviour, proximal and update",
        summary="Importance ratios from log-probabilities of the current, old (proximal) and behaviour policies, their "
                "product, and what PPO clipping sees; shows the error of using a recomputed log-probability as μ.",
        description="r = exp(log π_θ − log μ); decoupled: r_upd = exp(log π_θ − log π_old), w = exp(log π_old − log μ), "
                    "r_upd·w = r unclipped. Clipping applies to one of them and the placements are not equivalent.",
        request_model=PolicyRatioRequest,
        compute=compute_ratio,
        example={"logp_current": [-3.5, -3.25, -3.0, -2.75], "logp_behavior": -3.0, "logp_old": -3.25, "clip_epsilon": 0.2},
        cases=("rl-state-and-reproducibility",),
        sweepable=("logp_current",),
        chart=Chart(x="logp_current", y=("behavior_ratio", "update_ratio"), x_label="log π_θ", y_label="ratio"),
    ),
]

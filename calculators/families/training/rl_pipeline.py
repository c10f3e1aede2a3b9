"""`rl-pipeline`: generator → verifier → learner rates and which one bounds accepted samples/s, weight-sync time per
update, co-scheduling cycles of jobs whose phases own GPU pools (split pools or the same GPUs), host memory for
parked states, the device-memory peak of a phase switch, the GPU-seconds of making trainers wait, and the cost
break-even of extra rollout instances.
"""
from __future__ import annotations

from typing import Annotated, Literal

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_s, Fraction, GIB, LIST_SEP, Lookup,
    NonNegFloat, NonNegInt, num, Outputs, OutSweep, PosFloat, PosFloatSweep, PosInt, Profile, request_inputs, Result,
)
from calculators.framework import headline as hf
from calculators.families.training._rl import join as _join, rl_out as _out

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
    weight_bytes: NonNegFloat = Field(description="Inference weights of the rollout engine.", examples=[16381470720])
    kv_bytes: NonNegFloat = Field(description="KV cache pool of the rollout engine.", examples=[24 * GIB])
    runtime_bytes: NonNegFloat = Field(0.0, description="Runtime, allocator and workspace present in both phases.", examples=[4 * GIB])
    memory_per_device_bytes: PosFloat | None = Field(None, description="Device memory budget.", examples=[64 * GIB])


class IdleWait(CalcRequest):
    """Making a training group wait to save work elsewhere."""

    waiting_gpus: PosInt = Field(description="GPUs that sit idle while waiting.", examples=[64])
    wait_s: NonNegFloat = Field(description="Extra wait, seconds.", examples=[2])
    saved_gpu_s: NonNegFloat = Field(description="GPU-seconds saved elsewhere by waiting (e.g. in the verifier).", examples=[60])


class ExtraRollout(CalcRequest):
    """Renting extra rollout instances next to the training instance."""

    renamed_fields = {"base_usd_per_h": "base_price_per_hour_usd", "extra_usd_per_h": "extra_price_per_hour_usd"}

    base_price_per_hour_usd: PosFloat = Field(description="Hourly price of the training instance, USD.", examples=[83.79])
    extra_price_per_hour_usd: PosFloat = Field(description="Hourly price of one extra rollout instance, USD.", examples=[5.32])
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


#: a number, or one per point when `generator_samples_per_s` is swept (null where not finite)
#: the stage that bounds accepted samples/s ('reject_fraction' when everything is rejected)
RlPipelineStage = Literal["generator", "verifier", "learner", "reject_fraction"]


class RlPipelineSupplyOut(Outputs):
    """Supply and demand of the generator → verifier → learner loop, samples/s."""

    accepted_samples_per_s: OutSweep = Field(description="min(learner, admitted): a stable upper bound, "
                                                  "samples/s.")
    verified_samples_per_s: OutSweep = Field(description="min(generator, verifier), samples/s.")
    admitted_samples_per_s: OutSweep = Field(description="verified × (1 − reject_fraction), samples/s.")
    bound: RlPipelineStage | list[RlPipelineStage] = Field(description="The stage with the smallest capacity.")
    generator_utilization: OutSweep = Field(description="Share of the generator's rate the accepted flow uses.")
    verifier_utilization: OutSweep = Field(description="Share of the verifier's rate it uses (null without a "
                                                "verifier).")
    learner_utilization: OutSweep = Field(description="accepted / learner rate.")
    excess_generation_per_s: OutSweep = Field(description="Generated samples/s beyond what the loop can use, "
                                                   "samples/s.")


class RlPipelineWeightSyncOut(Outputs):
    sync_s: float | None = Field(description="fixed + weight bytes / bandwidth per update, s.")
    update_interval_s: OutSweep = Field(None, description="samples per update / accepted samples/s, s (with "
                                             "samples_per_update and the rates).")
    sync_share_if_exposed: OutSweep = Field(None, description="sync / (interval + sync): the share of time lost "
                                                 "if the sync is not overlapped.")


class RlPipelineMixOut(Outputs):
    """One mix of jobs sharing the pools."""

    label: str = Field(description="The mix's label (default: counts × job names).")
    pool_load_s: dict[str, float] = Field(description="Work per cycle on each pool, phases + switches, s, by pool.")
    longest_chain_s: float | None = Field(description="Longest job's phases run back to back, s.")
    cycle_lower_bound_s: float | None = Field(description="max(longest chain, busiest pool), s.")
    allowed_cycle_s: float | None = Field(description="Longest chain × (1 + slowdown_allowance), s.")
    feasible: bool = Field(description="The cycle bound is within the allowed cycle.")
    bound: str = Field(description="'chain', or 'pool <name>' when a pool's load sets the bound.")
    host_need_bytes: float | None = Field(description="Host memory for the parked states + reserve, B.")
    host_fits: bool | None = Field(None, description="host need ≤ host_memory_bytes (with host_memory_bytes).")


class RlPipelineCoscheduleOut(Outputs):
    solo_cycle_s: dict[str, float] = Field(description="Each job's phases back to back, s, by job name.")
    mixes: list[RlPipelineMixOut] = Field(description="One entry per mix, in order.")


class RlPipelinePhaseMemoryOut(Outputs):
    """Device memory of a GPU switching between training and rollout."""

    train_only_bytes: float | None = Field(description="Training state + runtime, B.")
    rollout_only_bytes: float | None = Field(description="Inference weights + KV + runtime, B.")
    naive_peak_bytes: float | None = Field(description="Everything resident at once, B.")
    staged_peak_bytes: float | None = Field(description="max(state + weights, weights + KV) + runtime, B.")
    naive_fits: bool | None = Field(None, description="Naive peak ≤ device memory (with memory_per_device_bytes).")
    staged_fits: bool | None = Field(None, description="Staged peak ≤ device memory (with memory_per_device_bytes).")
    staged_headroom_bytes: float | None = Field(None, description="device memory − staged peak, B (with "
                                                "memory_per_device_bytes).")


class RlPipelineIdleWaitOut(Outputs):
    extra_gpu_s: float | None = Field(description="GPUs waiting × wait, GPU·s.")
    net_gpu_s: float | None = Field(description="extra − saved elsewhere, GPU·s (negative: waiting pays).")
    worth_it: bool = Field(description="Waiting costs fewer GPU-seconds than it saves.")


class RlPipelineExtraRolloutOut(Outputs):
    total_usd_per_h: float | None = Field(description="base + extra instances × their price, USD/h (null on overflow).")
    break_even_multiplier: float | None = Field(description="total / base: the throughput gain that pays for the extras "
                                                "(null where it overflows, e.g. a subnormal base price).")
    cost_per_work_ratio: list[float | None] = Field(description="break-even / each throughput multiplier (< 1: cheaper "
                                                    "per unit of work; null where the ratio overflows).")


class RlPipelineOutputs(Outputs):
    """Outputs of rl-pipeline: one object per section given (supply needs the generator and learner rates)."""

    supply: RlPipelineSupplyOut | None = Field(None, description="Rates and the bounding stage (with the rates).")
    weight_sync: RlPipelineWeightSyncOut | None = Field(None, description="Weight-sync time per update.")
    coschedule: RlPipelineCoscheduleOut | None = Field(None, description="Cycle bounds of jobs sharing GPU pools.")
    phase_memory: RlPipelinePhaseMemoryOut | None = Field(None, description="Peak of a train ↔ rollout switch.")
    idle_wait: RlPipelineIdleWaitOut | None = Field(None, description="GPU-seconds of making trainers wait.")
    extra_rollout: RlPipelineExtraRolloutOut | None = Field(None, description="Break-even of extra rollout instances.")


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
                 f"min({num(first(g))}{LIST_SEP}{num(v)})" if v is not None else num(first(g)), upstream, "samples/s")
        admitted = upstream * keep
        res.step("admitted supply", "verified × (1 − reject)", f"{num(first(upstream))} × (1 − {num(req.reject_fraction)})", admitted, "samples/s")
        acc = res.step("accepted samples/s (stable upper bound)", "min(learner, admitted)", f"min({num(lr)}{LIST_SEP}{num(first(admitted))})",
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
        roll = pm.weight_bytes + pm.kv_bytes + pm.runtime_bytes
        naive = pm.train_state_bytes + pm.weight_bytes + pm.kv_bytes + pm.runtime_bytes
        staged = max(pm.train_state_bytes + pm.weight_bytes + pm.runtime_bytes, roll)
        res.step("naive switch peak", "state + W + KV + runtime (everything resident at once)", fmt_bytes(naive), naive, "B")
        res.step("staged switch peak", "max(state + W + runtime, W + KV + runtime): load W, sync, drop state, then KV", fmt_bytes(staged), staged, "B")
        pmo = {"train_only_bytes": train, "rollout_only_bytes": roll, "naive_peak_bytes": naive, "staged_peak_bytes": staged}
        if pm.memory_per_device_bytes is not None:
            pmo.update({"naive_fits": naive <= pm.memory_per_device_bytes, "staged_fits": staged <= pm.memory_per_device_bytes,
                        "staged_headroom_bytes": pm.memory_per_device_bytes - staged})
        o["phase_memory"] = pmo
    if req.idle_wait is not None:
        iw = req.idle_wait
        extra = iw.waiting_gpus * iw.wait_s
        res.step("GPU-seconds of waiting", "GPUs × wait", f"{iw.waiting_gpus} × {num(iw.wait_s)} s", extra, "GPU·s")
        o["idle_wait"] = {"extra_gpu_s": extra, "net_gpu_s": extra - iw.saved_gpu_s, "worth_it": extra < iw.saved_gpu_s}
    if req.extra_rollout is not None:
        er = req.extra_rollout
        total = er.base_price_per_hour_usd + er.extra_instances * er.extra_price_per_hour_usd
        be = total / er.base_price_per_hour_usd
        res.step("hourly cost with extras", "base + n × extra", f"{num(er.base_price_per_hour_usd)} + {er.extra_instances} × {num(er.extra_price_per_hour_usd)}", total, "USD/h")
        res.step("break-even throughput multiplier", "total / base", f"{num(total)} / {num(er.base_price_per_hour_usd)}", be, "×")
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


CALCULATORS = [
    Calculator(
        name="rl-pipeline",
        profile=Profile(8.5e-07, 697, 71),
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
        outputs_model=RlPipelineOutputs,
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
]

"""Mixture-of-experts arithmetic: expert size, routing, padding, dispatch, offload and placement.

Two calculators of the `moe` family:

* `moe`: what one MoE layer step touches. Expert parameters/bytes/FLOPs (3 matrices of
  hidden × expert_ffn for a SwiGLU expert), expected distinct experts hit by T tokens under
  uniform top-k routing, E·(1 − (1 − k/E)^T), the weight bytes that must be read once per step,
  grouped-GEMM padding of observed per-expert rows to a tile, capacity-factor drops, all-to-all
  dispatch rows/bytes with and without per-node de-duplication, routing-replay record size, and
  an optional CPU-expert vs copy-to-GPU comparison for offloaded experts.
* `moe-placement`: where the experts live. Per-rank routed bytes under expert parallelism,
  extra replicas, replica-aware balancing of a hot expert's rows, rebalancing payback and the
  weight bytes that must move when expert parallelism is resized.
"""
from __future__ import annotations

import math
from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    broadcast, CalcInputError, CalcRequest, Calculator, Chart, first, fmt_bytes, fmt_s, Lookup, NonNegFloat,
    NonNegInt, num, out, PosFloat, PosInt, PosIntSweep, Profile, request_inputs, Result,
)
from calculators.domain import MODEL_CONFIG_FIELD, model_record
from calculators.framework import headline as hf
from calculators.families.serving._moe_outputs import MoeOutputs, MoePlacementOutputs


def _out(x):
    """`out`, with a fast path for finite numeric arrays (large sweeps)."""
    if isinstance(x, np.ndarray) and x.ndim == 1 and x.dtype.kind in "fiu" and np.isfinite(x).all():
        return x.tolist()
    return out(x)


# --------------------------------------------------------------------------- shared expert spec

# Bounded counts: the bounds sit inside the Annotated type, where pydantic enforces them (a `le=` given to
# Field() next to a core alias such as PosInt is silently overridden by the alias's own bound).
Width = Annotated[int, Field(ge=1, le=10**7)]
ExpertCount = Annotated[int, Field(ge=1, le=10**6)]
SharedExperts = Annotated[int, Field(ge=0, le=10**4)]
LayerCount = Annotated[int, Field(ge=1, le=10**5)]
MatrixCount = Annotated[int, Field(ge=1, le=16)]
TileRows = Annotated[int, Field(ge=1, le=10**6)]
NodeCount = Annotated[int, Field(ge=1, le=10**5)]
RankCount = Annotated[int, Field(ge=1, le=10**6)]
#: bytes per weight or activation value (0.5 for 4-bit ... 64)
ValueBytes = Annotated[float, Field(gt=0, le=64, allow_inf_nan=False)]

class ExpertSpec(CalcRequest):
    """Fields that describe the experts; a `model` id (or a `model_config`) fills the ones not given."""

    model: str | None = Field(None, min_length=1, max_length=100, description="Model id in the store (e.g. `qwen3-235b-a22b`); explicit fields below override its facts.", examples=["qwen3-235b-a22b"])
    hf_config: dict | None = MODEL_CONFIG_FIELD
    expert_hidden_size: Width | None = Field(None, description="Width an expert reads and writes (usually the model's hidden size; Kimi K3 routes in a 3,584-wide latent).", examples=[4096])
    expert_ffn_size: Width | None = Field(None, description="Intermediate width of one expert (moe_intermediate_size).", examples=[1536])
    experts: ExpertCount | None = Field(None, description="Routed experts per MoE layer (E).", examples=[128])
    experts_per_token: ExpertCount | None = Field(None, description="Routed experts each token is sent to (top-k).", examples=[8])
    shared_experts: SharedExperts | None = Field(None, description="Shared experts every token runs (0 when absent).", examples=[0])
    moe_layers: LayerCount | None = Field(None, description="Number of MoE layers (model: layers − leading dense layers).", examples=[94])
    ffn_matrices: MatrixCount = Field(3, description="Weight matrices per expert: 3 for SwiGLU (gate, up, down).")
    weight_bytes_per_param: ValueBytes = Field(2.0, description="Bytes per expert weight: 2 for BF16, 1 for FP8, 0.5 for 4-bit (scales not included).")


def _spec(req: ExpertSpec, lookup: Lookup, res: Result) -> dict:
    rec = model_record(req, lookup, res, required=False)
    src = "model" if req.model is not None else "model_config"
    label = req.model if req.model is not None else ((rec.name or src) if rec is not None else src)
    if rec is not None and rec.moe is None:
        raise CalcInputError(src, f"{label} is not a mixture-of-experts model (no moe facts)")

    def pick(name: str, given, path: tuple[str, ...], required: bool = True):
        if given is not None:
            return given
        if rec is None:
            if required:
                raise CalcInputError(name, "give this field, a `model` id or a `model_config`")
            return None
        v = rec.value(*path, required=required, loc=name)
        if v is not None:
            res.cite(rec.source(*path))
        return v

    h = int(pick("expert_hidden_size", req.expert_hidden_size, ("hidden_size",)))
    f = int(pick("expert_ffn_size", req.expert_ffn_size, ("moe", "expert_ffn_size")))
    e = int(pick("experts", req.experts, ("moe", "experts")))
    k = int(pick("experts_per_token", req.experts_per_token, ("moe", "experts_per_token")))
    s = pick("shared_experts", req.shared_experts, ("moe", "shared_experts"), required=False)
    s = int(s or 0)
    if k > e:
        raise CalcInputError("experts_per_token", f"top-k {k} exceeds the {e} routed experts")
    layers = req.moe_layers
    if layers is None and rec is not None:
        total = rec.value("layers", required=False)
        dense = rec.value("moe", "dense_layers", required=False) or 0
        if total is not None:
            layers = int(total) - int(dense)
            res.cite(rec.source("layers"))
            if dense:
                res.cite(rec.source("moe", "dense_layers"))
            if layers < 1:
                raise CalcInputError("moe_layers", f"{label} has no MoE layers")
    params = req.ffn_matrices * h * f
    return {"h": h, "f": f, "E": e, "k": k, "shared": s, "layers": layers, "params": params,
            "bytes": params * req.weight_bytes_per_param, "name": hf.name_of(rec, "The MoE layer")}


def _size_steps(res: Result, sp: dict, req: ExpertSpec) -> None:
    res.step("expert parameters", "P_e = matrices × h × f",
             f"{req.ffn_matrices} × {num(sp['h'])} × {num(sp['f'])}", sp["params"], "parameters")
    res.step("bytes of one expert", "B_e = P_e × bytes/param",
             f"{num(sp['params'])} × {num(req.weight_bytes_per_param)} = {fmt_bytes(sp['bytes'])}", sp["bytes"], "B")


# --------------------------------------------------------------------------- moe

class Offload(CalcRequest):
    """Experts not resident on the GPU: run them on the CPU, or copy them to the GPU and run there."""

    gpu_resident_experts: NonNegInt = Field(description="Routed experts per layer kept in GPU memory; the rest live in host memory.", examples=[32])
    cpu_memory_bytes_per_s: PosFloat = Field(description="Effective host-memory read bandwidth for expert weights, bytes/s (100 GiB/s = 107374182400).", examples=[107374182400])
    cpu_flop_per_s: PosFloat = Field(description="Effective CPU matrix throughput, FLOP/s.", examples=[2e12])
    h2d_bytes_per_s: PosFloat = Field(description="Effective host-to-device copy bandwidth, bytes/s (one way).", examples=[25769803776])
    gpu_flop_per_s: PosFloat = Field(description="Effective GPU matrix throughput, FLOP/s.", examples=[1e14])


IdBytes = Annotated[int, Field(ge=1, le=8)]


class MoeRequest(ExpertSpec):
    """One MoE layer step over `tokens` tokens (sweepable)."""

    tokens: PosIntSweep = Field(1, description="Tokens routed through one MoE layer in this step (decode batch, or a prefill chunk). Sweepable.", examples=[8])
    activation_bytes: ValueBytes = Field(2.0, description="Bytes per activation value sent to an expert (2 for BF16).")
    tokens_per_expert: list[NonNegInt] | None = Field(None, min_length=1, max_length=100_000, description="Observed rows routed to each (local) expert in one layer step, for padding and capacity.", examples=[[32, 16, 8, 4, 2, 1, 1, 0]])
    tile_rows: TileRows | None = Field(None, description="Grouped-GEMM tile height: each expert's rows are padded to a multiple of it.", examples=[32])
    capacity_factor: Annotated[float, Field(gt=0, le=1000, allow_inf_nan=False)] | None = Field(None, description="Expert capacity = ceil(factor × rows / experts); rows above it are dropped.", examples=[1.25])
    ep_nodes: NodeCount | None = Field(None, description="Nodes (or ranks) the routed experts are spread over evenly; a token's activation is sent once per node it needs (de-duplicated dispatch).", examples=[8])
    expert_id_bytes: IdBytes | list[IdBytes] | None = Field(None, description="Bytes per stored expert id in a routing-replay record (2 = uint16, 4 = int32); a list compares encodings.", examples=[2])
    offload: Offload | None = Field(None, description="Compare running host-resident experts on the CPU with copying them to the GPU.")


def _expected_distinct(e: float, k: float, t: np.ndarray) -> np.ndarray:
    """E · (1 − (1 − k/E)^T), computed with log1p/expm1 so tiny k/E stays exact."""
    with np.errstate(divide="ignore"):
        return e * -np.expm1(t * math.log1p(-k / e)) if k < e else np.full_like(t, float(e))


def compute_moe(req: MoeRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    sp = _spec(req, lookup, res)
    h, E, k, S, L = sp["h"], sp["E"], sp["k"], sp["shared"], sp["layers"]
    T = broadcast({"tokens": req.tokens})["tokens"]
    _size_steps(res, sp, req)
    eb = sp["bytes"]
    flops_expert = 2.0 * sp["params"]
    per_layer_flops = res.step("expert FLOPs per token per layer", "F = 2 × P_e × (k + shared)",
                               f"2 × {num(sp['params'])} × ({k} + {S})", flops_expert * (k + S), "FLOP")
    o: dict = {
        "expert_params": sp["params"], "expert_bytes": eb, "expert_hidden_size": h, "expert_ffn_size": sp["f"],
        "experts": E, "experts_per_token": k, "shared_experts": S, "moe_layers": L,
        "flops_per_token_per_layer": per_layer_flops,
        "routed_flops_per_token_per_layer": flops_expert * k,
        "flops_per_token_all_layers": per_layer_flops * L if L else None,
        "routed_bytes_per_layer": E * eb,
        "shared_bytes_per_layer": S * eb,
        "routed_bytes_all_layers": E * eb * L if L else None,
        "per_token_weight_bytes_per_layer": k * eb,
    }
    if L:
        res.step("expert FLOPs per token, all MoE layers", "F × layers", f"{num(per_layer_flops)} × {L}", per_layer_flops * L, "FLOP")
    res.step("all routed experts of one layer", "E × B_e", f"{E} × {fmt_bytes(eb)}", E * eb, "B")

    distinct = _expected_distinct(E, k, T)
    res.step("expected distinct routed experts", "E_act = E × (1 − (1 − k/E)^T)",
             f"{E} × (1 − (1 − {k}/{E})^{num(first(T))})", distinct, "experts")
    read_layer = (distinct + S) * eb
    res.step("expected weight bytes read per layer", "(E_act + shared) × B_e (each touched expert read once)",
             f"({num(first(distinct))} + {S}) × {fmt_bytes(eb)}", read_layer, "B")
    o.update({
        "expected_distinct_experts": _out(distinct),
        "expected_rows_per_active_expert": _out(T * k / distinct),
        "expected_bytes_per_layer": _out(read_layer),
        "expected_bytes_per_step": _out(read_layer * L) if L else None,
        "min_bytes_per_layer": (k + S) * eb,
        "max_bytes_per_layer": _out((np.minimum(T * k, E) + S) * eb),
        "bytes_per_token_if_no_reuse_per_layer": _out(T * k * eb),
    })

    # all-to-all dispatch (one direction; combine sends the same rows back)
    rows = T * k
    row_bytes = h * req.activation_bytes
    disp = {"rows_per_layer": _out(rows), "bytes_per_layer": _out(rows * row_bytes),
            "roundtrip_bytes_per_layer": _out(2 * rows * row_bytes),
            "roundtrip_bytes_all_layers": _out(2 * rows * row_bytes * L) if L else None}
    res.step("dispatch bytes per layer (no de-duplication)", "T × k × h × bytes",
             f"{num(first(T))} × {k} × {num(h)} × {num(req.activation_bytes)}", rows * row_bytes, "B")
    if req.ep_nodes:
        G = req.ep_nodes
        if E % G:
            raise CalcInputError("ep_nodes", f"{E} experts do not spread evenly over {G} nodes")
        per_node = E // G
        # probability that none of a token's k distinct experts sits on a given node
        p_miss = math.prod((E - per_node - i) / (E - i) for i in range(k)) if E - per_node >= k else 0.0
        nodes_per_token = G * (1.0 - p_miss)
        drows = T * nodes_per_token
        res.step("nodes a token needs (de-duplicated)", "G × (1 − C(E − E/G, k) / C(E, k))",
                 f"{G} × (1 − C({E - per_node}, {k}) / C({E}, {k}))", nodes_per_token, "nodes")
        res.step("dispatch bytes per layer (one copy per node)", "T × nodes/token × h × bytes",
                 f"{num(first(T))} × {num(nodes_per_token)} × {num(h)} × {num(req.activation_bytes)}", drows * row_bytes, "B")
        disp.update({"ep_nodes": G, "nodes_per_token": nodes_per_token, "dedup_rows_per_layer": _out(drows),
                     "dedup_bytes_per_layer": _out(drows * row_bytes),
                     "dedup_roundtrip_bytes_per_layer": _out(2 * drows * row_bytes),
                     "dedup_roundtrip_bytes_all_layers": _out(2 * drows * row_bytes * L) if L else None,
                     "directed_messages_per_step": 2 * G * L if L else 2 * G,
                     "dedup_saving": _out(1.0 - nodes_per_token / k)})
    o["dispatch"] = disp

    if req.expert_id_bytes:
        if not L:
            raise CalcInputError("moe_layers", "the routing record needs the number of MoE layers")
        if isinstance(req.expert_id_bytes, list) and len(req.expert_id_bytes) > 16:
            raise CalcInputError("expert_id_bytes", "at most 16 encodings")
        ids = broadcast({"tokens": req.tokens, "expert_id_bytes": req.expert_id_bytes})["expert_id_bytes"]
        rec_bytes = T * L * k * ids
        res.step("routing-replay record", "T × layers × k × id bytes",
                 f"{num(first(T))} × {L} × {k} × {num(first(ids))}", rec_bytes, "B")
        o["routing_record_bytes"] = _out(rec_bytes)

    if req.tokens_per_expert is not None:
        tpe = np.asarray(req.tokens_per_expert, dtype=float)
        actual = float(tpe.sum())
        pad: dict = {"experts": len(req.tokens_per_expert), "actual_rows": actual, "max_rows": float(tpe.max())}
        if req.tile_rows:
            B = req.tile_rows
            nonempty = float((np.ceil(tpe / B) * B).sum())
            all_max = float(len(tpe) * math.ceil(tpe.max() / B) * B)
            res.step("grouped GEMM rows, each expert padded to whole tiles", "Σ_e ceil(t_e / B) × B",
                     f"Σ ceil(t_e / {B}) × {B} over {len(tpe)} experts", nonempty, "rows")
            res.step("grouped GEMM rows, every expert padded to the busiest", "E_local × ceil(max t_e / B) × B",
                     f"{len(tpe)} × ceil({num(tpe.max())} / {B}) × {B}", all_max, "rows")
            pad.update({"tile_rows": B, "nonempty_blockwise_rows": nonempty, "all_experts_to_max_rows": all_max,
                        "nonempty_blockwise_ratio": nonempty / actual if actual else None,
                        "all_experts_to_max_ratio": all_max / actual if actual else None})
        if req.capacity_factor:
            cap = math.ceil(req.capacity_factor * actual / len(tpe)) if actual else 0
            dropped = float(np.maximum(tpe - cap, 0).sum())
            res.step("capacity drops", "Σ_e max(0, t_e − ceil(cf × Σt / E_local))",
                     f"capacity {cap} rows per expert", dropped, "rows")
            pad.update({"capacity_rows": cap, "dropped_rows": dropped,
                        "dropped_fraction": dropped / actual if actual else 0.0})
        o["observed"] = pad
    if req.capacity_factor:
        o["capacity_rows_uniform"] = _out(np.ceil(req.capacity_factor * T * k / E))

    if req.offload is not None:
        off = req.offload
        if off.gpu_resident_experts > E:
            raise CalcInputError(("offload", "gpu_resident_experts"), f"more resident experts than the {E} routed experts")
        cold = E - off.gpu_resident_experts
        cold_distinct = cold * -np.expm1(T * math.log1p(-k / E)) if k < E else np.full_like(T, float(cold))
        tasks = T * k * cold / E
        fl = tasks * flops_expert
        cpu_mem = cold_distinct * eb / off.cpu_memory_bytes_per_s
        cpu_cmp = fl / off.cpu_flop_per_s
        cpu = np.maximum(cpu_mem, cpu_cmp)
        gpu = cold_distinct * eb / off.h2d_bytes_per_s + fl / off.gpu_flop_per_s
        res.step("host-resident experts touched", "E_cold × (1 − (1 − k/E)^T)",
                 f"{cold} × (1 − (1 − {k}/{E})^{num(first(T))})", cold_distinct, "experts")
        res.step("CPU path (lower bound)", "max(E_cold,act × B_e / B_dram, T·k·E_cold/E × 2P_e / F_cpu)",
                 f"max({fmt_s(first(cpu_mem))}, {fmt_s(first(cpu_cmp))})", cpu, "s")
        res.step("copy-to-GPU path (serial)", "E_cold,act × B_e / B_h2d + T·k·E_cold/E × 2P_e / F_gpu",
                 f"{fmt_s(first(cold_distinct * eb / off.h2d_bytes_per_s))} + {fmt_s(first(fl / off.gpu_flop_per_s))}", gpu, "s")
        o["offload"] = {"cold_experts": cold, "expected_cold_experts": _out(cold_distinct),
                        "expected_cold_tasks": _out(tasks), "cpu_memory_s": _out(cpu_mem), "cpu_compute_s": _out(cpu_cmp),
                        "cpu_path_s": _out(cpu), "gpu_path_s": _out(gpu),
                        "faster": _out(np.where(cpu <= gpu, "cpu", "gpu")) if np.ndim(cpu) else ("cpu" if cpu <= gpu else "gpu"),
                        "activation_roundtrip_bytes_per_layer": _out(2 * T * row_bytes)}

    res.outputs = o
    res.assume(
        "Routing is uniform and independent: each token picks k distinct experts uniformly at random (a teaching "
        "model; real routers are skewed, which touches fewer experts and loads some far more).",
        "Each touched expert's weights are read once per layer step however many tokens it serves; attention, router, "
        "activations, caches and re-reads by tiled kernels are not counted.",
        f"An expert is {req.ffn_matrices} matrices of h × f; FLOPs count a multiply-add as 2.",
        "Dispatch counts one direction per layer (token activations to experts); combine sends the same number of rows back. "
        "De-duplication sends a token once per node that holds at least one of its experts.",
    )
    if req.offload is not None:
        res.assume("Offload: the CPU path is bounded by the larger of weight streaming and matrix work (they overlap); the "
                   "GPU path copies each touched cold expert then computes, serially. Activation hand-off, routing and "
                   "synchronisation are not included.")
    res.headline = _moe_headline(req, res.outputs, sp)
    return res


def _moe_headline(req: MoeRequest, o: dict, sp: dict) -> str:
    """Experts one step touches and the weight bytes it reads (a sweep: its first point)."""
    n = hf.n_points(req.tokens)
    text = (f"{sp['name']}: a step of {hf.plural(req.tokens, 'token')} touches {hf.fmt_num(o.get('expected_distinct_experts'))} "
            f"of {sp['E']} routed experts per layer on average, reading {hf.fmt_bytes(o.get('expected_bytes_per_layer'))} "
            "of expert weights per layer")
    if o.get("expected_bytes_per_step") is not None:
        text += f" ({hf.fmt_bytes(o['expected_bytes_per_step'])} over {sp['layers']} MoE layers)"
    off = o.get("offload")
    if isinstance(off, dict) and off.get("faster") is not None:
        text += (f"; with {off.get('cold_experts')} experts offloaded, the {str(hf.first_value(off['faster'])).upper()} path is faster "
                 f"({hf.fmt_seconds(off.get('cpu_path_s'))} on CPU, {hf.fmt_seconds(off.get('gpu_path_s'))} copying to GPU)")
    if n > 1:
        text += f" (first of {n:,} points)"
    return hf.sentence(text)


# --------------------------------------------------------------------------- placement

class ReplicaBalance(CalcRequest):
    """Rows of one hot expert spread over the ranks that hold a replica of it."""

    rank_rows: list[NonNegInt] = Field(min_length=1, max_length=4096, description="Rows each rank already executes for its other experts.", examples=[[512, 256, 512, 512]])
    hot_rows: NonNegInt = Field(description="Rows routed to the replicated (hot) expert.", examples=[256])
    replica_ranks: list[NonNegInt] = Field(min_length=1, max_length=4096, description="Indices (0-based) of the ranks holding a replica.", examples=[[0, 1]])
    flop_per_s: PosFloat = Field(description="Effective matrix throughput of one rank, FLOP/s.", examples=[50e12])
    overhead_s: NonNegFloat = Field(0.0, description="Extra time the balanced dispatch costs (planning, metadata), seconds.", examples=[60e-6])


class Rebalance(CalcRequest):
    """Moving experts to a better layout: pay the exposed time once, save a little per step."""

    experts_moved: PosInt = Field(description="Experts whose weights move.", examples=[8])
    link_bandwidth_bytes_per_s: PosFloat = Field(description="Bandwidth of the critical ingress link, bytes/s.", examples=[25e9])
    exposed_s: NonNegFloat = Field(description="Reconfiguration time exposed on the serving path, seconds.", examples=[0.02])
    saving_per_step_s: PosFloat = Field(description="Time saved per engine step by the better layout, seconds.", examples=[40e-6])
    horizon_steps: list[NonNegInt] = Field(default_factory=list, max_length=1000, description="Steps the layout stays in use, to report net gain.", examples=[[200, 2000]])


class Resize(CalcRequest):
    """Change the expert-parallel degree; new ranks receive their share of routed weights."""

    from_ranks: RankCount = Field(description="Expert-parallel ranks before.", examples=[8])
    to_ranks: RankCount = Field(description="Expert-parallel ranks after.", examples=[16])
    bytes_per_s: PosFloat = Field(description="Aggregate bandwidth available to send weights, bytes/s.", examples=[100e9])


class PlacementRequest(ExpertSpec):
    """Expert placement questions for one model."""

    ep: RankCount | None = Field(None, description="Expert-parallel ranks the routed experts are spread over evenly.", examples=[16])
    extra_replicas: list[NonNegInt] | None = Field(None, min_length=1, max_length=1000, description="Extra expert copies per rank (each costs one expert's bytes), one scenario per entry.", examples=[[94, 8]])
    replica_balance: ReplicaBalance | None = None
    rebalance: Rebalance | None = None
    resize: Resize | None = None


def _water_fill(base: list[int], hot: int) -> list[int]:
    """Distribute `hot` rows over ranks with `base` rows so that the busiest is as light as possible."""
    order = sorted(range(len(base)), key=lambda i: base[i])
    b = [base[i] for i in order]
    n = len(b)
    level = b[-1]
    for m in range(1, n + 1):
        lv = (hot + sum(b[:m])) / m
        if m == n or lv <= b[m]:
            level, used = lv, m
            break
    fl = math.floor(level)
    add = [max(0, fl - b[i]) if i < used else 0 for i in range(n)]
    rest = hot - sum(add)
    for i in range(used):
        if rest <= 0:
            break
        add[i] += 1
        rest -= 1
    result = [0] * n
    for pos, i in enumerate(order):
        result[i] = base[i] + add[pos]
    return result


def compute_placement(req: PlacementRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    sp = _spec(req, lookup, res)
    _size_steps(res, sp, req)
    E, L, eb = sp["E"], sp["layers"], sp["bytes"]
    o: dict = {"expert_params": sp["params"], "expert_bytes": eb, "experts": E, "moe_layers": L,
               "routed_bytes_per_layer": E * eb, "routed_bytes_all_layers": E * eb * L if L else None}
    res.step("routed experts, one layer", "E × B_e", f"{E} × {fmt_bytes(eb)}", E * eb, "B")
    if L:
        res.step("routed experts, all MoE layers", "layers × E × B_e", f"{L} × {E} × {fmt_bytes(eb)}", E * eb * L, "B")
    if req.ep:
        per = E / req.ep
        o["experts_per_rank"] = per
        o["per_rank_bytes_per_layer"] = per * eb
        o["per_rank_bytes"] = per * eb * L if L else None
        res.step("routed bytes per rank", "layers × (E / EP) × B_e", f"{L or 1} × ({E} / {req.ep}) × {fmt_bytes(eb)}",
                 per * eb * (L or 1), "B")
    if req.extra_replicas is not None:
        reps = np.asarray(req.extra_replicas, dtype=float)
        o["extra_replica_bytes"] = _out(reps * eb)
        res.step("extra replica bytes per rank", "replicas × B_e", f"{req.extra_replicas[0]} × {fmt_bytes(eb)}", reps * eb, "B")
    if req.replica_balance is not None:
        rb = req.replica_balance
        n = len(rb.rank_rows)
        bad = [r for r in rb.replica_ranks if r >= n]
        if bad:
            raise CalcInputError(("replica_balance", "replica_ranks"), f"rank {bad[0]} is outside the {n} ranks")
        if len(set(rb.replica_ranks)) != len(rb.replica_ranks):
            raise CalcInputError(("replica_balance", "replica_ranks"), "a rank is listed twice")
        reps = rb.replica_ranks
        split = list(rb.rank_rows)
        q, r = divmod(rb.hot_rows, len(reps))
        for j, i in enumerate(reps):
            split[i] += q + (1 if j < r else 0)
        filled = list(rb.rank_rows)
        for i, v in zip(reps, _water_fill([rb.rank_rows[i] for i in reps], rb.hot_rows)):
            filled[i] = v
        row_flops = 2.0 * sp["params"]
        t_split = max(split) * row_flops / rb.flop_per_s
        t_fill = max(filled) * row_flops / rb.flop_per_s
        res.step("busiest rank, hot rows split evenly", "max rows × 2P_e / F", f"{max(split)} × {num(row_flops)} / {num(rb.flop_per_s)}", t_split, "s")
        res.step("busiest rank, hot rows by headroom", "max rows × 2P_e / F", f"{max(filled)} × {num(row_flops)} / {num(rb.flop_per_s)}", t_fill, "s")
        total_rows = sum(rb.rank_rows) + rb.hot_rows
        o["replica_balance"] = {
            "total_rows": total_rows, "mean_rows": total_rows / n, "flops_per_row": row_flops,
            "split_even_rows": split, "split_even_max_rows": max(split), "split_even_s": t_split,
            "by_headroom_rows": filled, "by_headroom_max_rows": max(filled), "by_headroom_s": t_fill,
            "saving_s": t_split - t_fill, "net_saving_s": t_split - t_fill - rb.overhead_s,
        }
    if req.rebalance is not None:
        rb2 = req.rebalance
        payload = rb2.experts_moved * eb
        t = payload / rb2.link_bandwidth_bytes_per_s
        steps = rb2.exposed_s / rb2.saving_per_step_s
        res.step("rebalance payload", "n × B_e", f"{rb2.experts_moved} × {fmt_bytes(eb)}", payload, "B")
        res.step("transfer lower bound", "payload / B_link", f"{num(payload)} B / {num(rb2.link_bandwidth_bytes_per_s)} B/s", t, "s")
        res.step("break-even steps", "exposed / saving per step", f"{fmt_s(rb2.exposed_s)} / {fmt_s(rb2.saving_per_step_s)}", steps, "steps")
        o["rebalance"] = {"payload_bytes": payload, "transfer_lower_bound_s": t, "break_even_steps": steps,
                          "net_saving_s": [hz * rb2.saving_per_step_s - rb2.exposed_s for hz in rb2.horizon_steps]}
    if req.resize is not None:
        rz = req.resize
        if not L:
            raise CalcInputError("moe_layers", "resizing needs the number of MoE layers")
        total = E * eb * L
        before, after = total / rz.from_ranks, total / rz.to_ranks
        moved = total * max(rz.to_ranks - rz.from_ranks, 0) / rz.to_ranks
        t = moved / rz.bytes_per_s
        res.step("bytes the new ranks receive", "total × (new − old) / new", f"{fmt_bytes(total)} × ({rz.to_ranks} − {rz.from_ranks}) / {rz.to_ranks}", moved, "B")
        res.step("transfer lower bound", "bytes / aggregate bandwidth", f"{num(moved)} B / {num(rz.bytes_per_s)} B/s", t, "s")
        o["resize"] = {"per_rank_bytes_before": before, "per_rank_bytes_after": after, "new_ranks_receive_bytes": moved,
                       "transfer_lower_bound_s": t}
        if rz.to_ranks < rz.from_ranks:
            res.assume("Scale-in: the remaining ranks must take the departing ranks' experts; check their memory for weights, KV and workspace.")
    res.outputs = _out(o)
    res.assume(
        "Routed experts only: attention, embeddings, output head and shared experts are placed separately.",
        "Experts spread evenly over ranks with no redundant copies unless `extra_replicas` says otherwise.",
        "Rows are token-expert pairs; a rank's matrix time is its busiest row count × 2 × P_e / F (no tile padding, "
        "weight re-reads or communication).",
    )
    res.headline = _placement_headline(req, res.outputs, sp)
    return res


def _placement_headline(req: PlacementRequest, o: dict, sp: dict) -> str:
    """Routed-expert bytes per rank, and what rebalancing or resizing costs (what-ifs: each one's answer)."""
    total = o.get("routed_bytes_all_layers")
    text = (f"{sp['name']}'s routed experts ({sp['E']} per layer × {sp['layers']} layers) take {hf.fmt_bytes(total)}"
            if total is not None else
            f"{sp['name']}'s {sp['E']} routed experts take {hf.fmt_bytes(o.get('routed_bytes_per_layer'))} per layer")
    if req.ep:
        per = o.get("per_rank_bytes") if o.get("per_rank_bytes") is not None else o.get("per_rank_bytes_per_layer")
        text += (f"; over {req.ep} EP ranks each holds {hf.fmt_num(o.get('experts_per_rank'))} experts per layer, "
                 f"{hf.fmt_bytes(per)}{'' if o.get('per_rank_bytes') is not None else ' per layer'}")
    rb = o.get("replica_balance")
    if isinstance(rb, dict):
        text += (f"; placing hot rows by headroom saves {hf.fmt_seconds(rb.get('saving_s'))} per step "
                 f"({hf.fmt_seconds(rb.get('net_saving_s'))} after overhead)")
    rb2 = o.get("rebalance")
    if isinstance(rb2, dict):
        text += (f"; moving {hf.plural(req.rebalance.experts_moved, 'expert')} ({hf.fmt_bytes(rb2.get('payload_bytes'))}) "
                 f"pays off after {hf.fmt_num(rb2.get('break_even_steps'))} steps")
    rz = o.get("resize")
    if isinstance(rz, dict):
        text += (f"; resizing from {req.resize.from_ranks} to {req.resize.to_ranks} ranks sends "
                 f"{hf.fmt_bytes(rz.get('new_ranks_receive_bytes'))} to the new ranks, at least "
                 f"{hf.fmt_seconds(rz.get('transfer_lower_bound_s'))}")
    return hf.sentence(text)


CALCULATORS = [
    Calculator(
        name="moe",
        profile=Profile(1e-06, 1095, 253),
        family="moe",
        title="MoE layer step: experts touched, bytes, padding, dispatch",
        summary="How many distinct experts a batch of tokens touches under top-k routing, the expert weight bytes "
                "read per step, grouped-GEMM padding, capacity drops and all-to-all dispatch volume.",
        description="Expert size P_e = 3·h·f (SwiGLU), bytes = P_e × bytes/param, FLOPs/token/layer = 2·P_e·(k + "
                    "shared). Under uniform independent top-k routing T tokens touch E·(1 − (1 − k/E)^T) distinct "
                    "experts in expectation; each is read once per layer step. Grouped GEMM pads each expert's rows "
                    "to tiles (Σ ceil(t_e/B)·B) or, worse, every expert to the busiest one. Dispatch sends T·k rows of "
                    "h values per direction, or T × (nodes a token needs) when de-duplicated per node. Optional: "
                    "routing-replay record size and a CPU-vs-GPU comparison for host-resident experts. Limits: "
                    "uniform routing is a teaching model; real routing is skewed.",
        request_model=MoeRequest,
        compute=compute_moe,
        outputs_model=MoeOutputs,
        example={"model": "qwen3-235b-a22b", "tokens": [1, 8, 32], "tokens_per_expert": [32, 16, 8, 4, 2, 1, 1, 0],
                 "tile_rows": 32, "ep_nodes": 8},
        cases=("moe-and-startup", "model-resource-accounting", "weight-offload-execution", "execution-feedback",
               "expert-dispatch-and-resizing", "pd-af-heterogeneous"),
        sweepable=("tokens",),
        chart=Chart(x="tokens", y=("expected_distinct_experts",), x_label="tokens in the step", y_label="distinct experts"),
    ),
    Calculator(
        name="moe-placement",
        family="moe",
        title="Expert placement: per-rank bytes, replicas, balancing, moves",
        summary="Routed expert bytes per expert-parallel rank, the cost of extra replicas, balancing a hot expert's "
                "rows over its replicas, rebalancing payback and the bytes moved when EP is resized.",
        description="Routed bytes = layers × E × B_e, per rank ÷ EP. A hot expert's rows go either evenly to its "
                    "replicas or by headroom (water-filling), and the busiest rank's rows × 2P_e / F bounds the layer's "
                    "matrix time. Rebalancing moves n × B_e over the ingress link and pays back after exposed / "
                    "saving-per-step steps. Growing EP from p to q ranks sends total × (q − p)/q bytes to the new ranks.",
        request_model=PlacementRequest,
        compute=compute_placement,
        outputs_model=MoePlacementOutputs,
        example={"model": "qwen3-235b-a22b", "ep": 16, "extra_replicas": [94, 8],
                 "replica_balance": {"rank_rows": [512, 256, 512, 512], "hot_rows": 256, "replica_ranks": [0, 1],
                                     "flop_per_s": 50e12, "overhead_s": 60e-6},
                 "rebalance": {"experts_moved": 8, "link_bandwidth_bytes_per_s": 25e9, "exposed_s": 0.02,
                               "saving_per_step_s": 40e-6, "horizon_steps": [200, 2000]},
                 "resize": {"from_ranks": 8, "to_ranks": 16, "bytes_per_s": 100e9}},
        cases=("expert-dispatch-and-resizing", "weight-handoff", "moe-and-startup"),
    ),
]

"""The typed answers of `moe` (one MoE layer step: experts touched, bytes, dispatch, padding, offload) and
`moe-placement` (per-rank bytes, replica balancing, rebalancing and resizing)."""
from __future__ import annotations

from typing import Literal

from pydantic import Field

from calculators.framework import Outputs, OutSweep

#: a number, or one per point when `tokens` is swept (null where not finite)
#: which way of running host-resident experts is faster
MoeOffloadPath = Literal["cpu", "gpu"]


class MoeDispatchOut(Outputs):
    """All-to-all dispatch of one direction (combine sends the same rows back)."""

    rows_per_layer: OutSweep = Field(description="Token-expert rows sent per layer, T × k (a whole number, written as "
                                   "a float).")
    bytes_per_layer: OutSweep = Field(description="Dispatch bytes per layer, T × k × h × activation bytes, B.")
    roundtrip_bytes_per_layer: OutSweep = Field(description="Dispatch + combine bytes per layer, B.")
    roundtrip_bytes_all_layers: OutSweep = Field(description="Dispatch + combine bytes over the MoE layers, B (null "
                                               "without a layer count).")
    ep_nodes: int | None = Field(None, description="Nodes the experts are spread over (with ep_nodes).")
    nodes_per_token: float | None = Field(None, description="Expected nodes a token's k experts sit on (with ep_nodes).")
    dedup_rows_per_layer: OutSweep = Field(None, description="Rows per layer sent once per node, T × nodes_per_token "
                                         "(with ep_nodes).")
    dedup_bytes_per_layer: OutSweep = Field(None, description="De-duplicated dispatch bytes per layer, B (with ep_nodes).")
    dedup_roundtrip_bytes_per_layer: OutSweep = Field(None, description="De-duplicated dispatch + combine bytes per "
                                                    "layer, B (with ep_nodes).")
    dedup_roundtrip_bytes_all_layers: OutSweep = Field(None, description="The same over the MoE layers, B (null without "
                                                     "a layer count; with ep_nodes).")
    directed_messages_per_step: int | None = Field(None, description="Directed node-to-node messages per step, "
                                                   "2 × nodes (× MoE layers when known; with ep_nodes).")
    dedup_saving: float | None = Field(None, description="Share of dispatch rows saved by de-duplication, "
                                       "1 − nodes_per_token / k (with ep_nodes).")


class MoeObservedRowsOut(Outputs):
    """Grouped-GEMM padding and capacity drops of the observed per-expert rows."""

    experts: int = Field(description="Experts in tokens_per_expert.")
    actual_rows: float | None = Field(description="Rows routed in all, Σ t_e (a whole number, written as a float).")
    max_rows: float | None = Field(description="Rows of the busiest expert (a whole number, written as a float).")
    tile_rows: int | None = Field(None, description="Tile height the rows are padded to (with tile_rows).")
    nonempty_blockwise_rows: float | None = Field(None, description="Rows computed when each expert is padded to whole "
                                                  "tiles, Σ ceil(t_e / B) × B (with tile_rows).")
    all_experts_to_max_rows: float | None = Field(None, description="Rows computed when every expert is padded to the "
                                                  "busiest one (with tile_rows).")
    nonempty_blockwise_ratio: float | None = Field(None, description="nonempty_blockwise_rows / actual_rows (null "
                                                   "with no rows; with tile_rows).")
    all_experts_to_max_ratio: float | None = Field(None, description="all_experts_to_max_rows / actual_rows (null "
                                                   "with no rows; with tile_rows).")
    capacity_rows: int | None = Field(None, description="Capacity per expert, ceil(factor × rows / experts) (with "
                                      "capacity_factor).")
    dropped_rows: float | None = Field(None, description="Rows above capacity, dropped (with capacity_factor).")
    dropped_fraction: float | None = Field(None, description="dropped_rows / actual_rows (with capacity_factor).")


class MoeOffloadOut(Outputs):
    """Host-resident experts: run on the CPU, or copy to the GPU and run there."""

    cold_experts: int = Field(description="Routed experts per layer kept in host memory.")
    expected_cold_experts: OutSweep = Field(description="Expected host-resident experts the step touches.")
    expected_cold_tasks: OutSweep = Field(description="Expected token-expert rows routed to host-resident experts.")
    cpu_memory_s: OutSweep = Field(description="Time to stream the touched cold experts from host memory, s.")
    cpu_compute_s: OutSweep = Field(description="CPU matrix time of the cold rows, s.")
    cpu_path_s: OutSweep = Field(description="CPU path, the larger of the two (they overlap), s.")
    gpu_path_s: OutSweep = Field(description="Copy-to-GPU path, copy then GPU compute, s.")
    faster: MoeOffloadPath | list[MoeOffloadPath] = Field(description="The faster path (ties: cpu).")
    activation_roundtrip_bytes_per_layer: OutSweep = Field(description="Activations to the experts and back per layer, "
                                                         "2 × T × h × activation bytes, B.")


class MoeOutputs(Outputs):
    """Outputs of moe; lists where `tokens` is swept. Per-layer values are for one MoE layer step."""

    expert_params: int = Field(description="Parameters of one routed expert, matrices × h × f.")
    expert_bytes: float | None = Field(description="Bytes of one expert at weight_bytes_per_param, B.")
    expert_hidden_size: int = Field(description="Width h an expert reads and writes.")
    expert_ffn_size: int = Field(description="Intermediate width f of one expert.")
    experts: int = Field(description="Routed experts per MoE layer (E).")
    experts_per_token: int = Field(description="Routed experts per token (top-k).")
    shared_experts: int = Field(description="Shared experts every token runs.")
    moe_layers: int | None = Field(description="MoE layers (null when neither given nor known for the model).")
    flops_per_token_per_layer: float | None = Field(description="Expert FLOP per token per layer, 2 × P_e × (k + shared).")
    routed_flops_per_token_per_layer: float | None = Field(description="Routed-expert FLOP per token per layer, 2 × P_e × k.")
    flops_per_token_all_layers: float | None = Field(description="Expert FLOP per token over the MoE layers (null "
                                                     "without a layer count).")
    routed_bytes_per_layer: float | None = Field(description="Bytes of all routed experts of one layer, E × B_e, B.")
    shared_bytes_per_layer: float | None = Field(description="Bytes of the shared experts of one layer, B.")
    routed_bytes_all_layers: float | None = Field(description="Bytes of all routed experts over the MoE layers, B "
                                                  "(null without a layer count).")
    per_token_weight_bytes_per_layer: float | None = Field(description="Routed expert bytes one token needs per layer, "
                                                    "k × B_e, B.")
    expected_distinct_experts: OutSweep = Field(description="Expected distinct routed experts T tokens touch, "
                                              "E·(1 − (1 − k/E)^T).")
    expected_rows_per_active_expert: OutSweep = Field(description="Token rows per touched expert, T·k / distinct.")
    expected_bytes_per_layer: OutSweep = Field(description="Expected expert weight bytes read per layer step, "
                                             "(distinct + shared) × B_e, B.")
    expected_bytes_per_step: OutSweep = Field(description="The same over the MoE layers, B (null without a layer count).")
    min_bytes_per_layer: float | None = Field(description="Fewest weight bytes a step reads per layer, (k + shared) × B_e, B.")
    max_bytes_per_layer: OutSweep = Field(description="Most weight bytes a step reads per layer, (min(T·k, E) + shared) "
                                        "× B_e, B.")
    bytes_per_token_if_no_reuse_per_layer: OutSweep = Field(description="Weight bytes if every token read its experts "
                                                          "alone, T × k × B_e, B.")
    dispatch: MoeDispatchOut = Field(description="All-to-all dispatch volume.")
    routing_record_bytes: OutSweep = Field(None, description="Size of a routing-replay record, T × layers × k × id "
                                         "bytes, B (with expert_id_bytes; a list per encoding).")
    observed: MoeObservedRowsOut | None = Field(None, description="Padding and drops of the observed rows (with "
                                                "tokens_per_expert).")
    capacity_rows_uniform: OutSweep = Field(None, description="Capacity per expert under uniform routing, "
                                          "ceil(factor × T × k / E) rows (with capacity_factor).")
    offload: MoeOffloadOut | None = Field(None, description="CPU vs copy-to-GPU comparison (with offload).")


class MoeReplicaBalanceOut(Outputs):
    """A hot expert's rows over the ranks holding its replicas."""

    total_rows: int = Field(description="Rows of all ranks plus the hot rows.")
    mean_rows: float | None = Field(description="total_rows / ranks.")
    flops_per_row: float | None = Field(description="FLOP per row, 2 × P_e.")
    split_even_rows: list[int] = Field(description="Rows per rank with the hot rows split evenly over the replicas.")
    split_even_max_rows: int = Field(description="Busiest rank's rows, split evenly.")
    split_even_s: float | None = Field(description="Busiest rank's matrix time, split evenly, s.")
    by_headroom_rows: list[int] = Field(description="Rows per rank with the hot rows placed by headroom "
                                        "(water-filling).")
    by_headroom_max_rows: int = Field(description="Busiest rank's rows, by headroom.")
    by_headroom_s: float | None = Field(description="Busiest rank's matrix time, by headroom, s.")
    saving_s: float | None = Field(description="split_even_s − by_headroom_s, s.")
    net_saving_s: float | None = Field(description="saving_s − overhead_s, s (negative: not worth it).")


class MoeRebalanceOut(Outputs):
    payload_bytes: float | None = Field(description="Bytes of the experts moved, n × B_e, B.")
    transfer_lower_bound_s: float | None = Field(description="payload / link bandwidth, s.")
    break_even_steps: float | None = Field(description="Steps to pay back the exposed time, exposed / saving per step.")
    net_saving_s: list[float | None] = Field(description="Saving minus exposed time after each horizon, s, in request order.")


class MoeResizeOut(Outputs):
    per_rank_bytes_before: float | None = Field(description="Routed bytes per rank before, B.")
    per_rank_bytes_after: float | None = Field(description="Routed bytes per rank after, B.")
    new_ranks_receive_bytes: float | None = Field(description="Bytes the new ranks receive, total × (new − old) / new, B "
                                           "(0 when shrinking).")
    transfer_lower_bound_s: float | None = Field(description="Those bytes / aggregate bandwidth, s.")


class MoePlacementOutputs(Outputs):
    """Outputs of moe-placement; the optional parts appear with their request fields."""

    expert_params: int = Field(description="Parameters of one routed expert, matrices × h × f.")
    expert_bytes: float | None = Field(description="Bytes of one expert, B.")
    experts: int = Field(description="Routed experts per MoE layer (E).")
    moe_layers: int | None = Field(description="MoE layers (null when neither given nor known for the model).")
    routed_bytes_per_layer: float | None = Field(description="Bytes of all routed experts of one layer, B.")
    routed_bytes_all_layers: float | None = Field(description="The same over the MoE layers, B (null without a layer "
                                                  "count).")
    experts_per_rank: float | None = Field(None, description="E / ep (with ep).")
    per_rank_bytes_per_layer: float | None = Field(None, description="Routed bytes per rank per layer, B (with ep).")
    per_rank_bytes: float | None = Field(None, description="Routed bytes per rank over the MoE layers, B (null "
                                         "without a layer count; with ep).")
    extra_replica_bytes: list[float] | None = Field(None, description="Bytes of the extra replicas per rank, one per "
                                                    "scenario, B (with extra_replicas).")
    replica_balance: MoeReplicaBalanceOut | None = Field(None, description="Hot-expert balancing (with replica_balance).")
    rebalance: MoeRebalanceOut | None = Field(None, description="Rebalancing payback (with rebalance).")
    resize: MoeResizeOut | None = Field(None, description="Bytes moved by resizing expert parallelism (with resize).")

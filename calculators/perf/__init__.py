"""The performance models of a model step: the α–β cost of collectives (`collective`), the shared terms of a step's
work (`step_terms`), the step model of any layout and its two evaluators (`step_model`, `step_eval`), NVIDIA
AIConfigurator's measured kernel tables (`measured_tables`, `measured`) and the measured step estimate built from
them (`measured_step`, `measured_estimate`), and a step's time on hardware, kernels + its collectives over the TP link
(`step_time`). Families import from this face.
"""
from __future__ import annotations

from calculators.perf.collective import (
    Algorithm, BUS_FACTOR, FORMULAS, Label, Operation, ROUNDS, chunk_bytes, collective_cost, resolve_link,
    ring_allreduce_s,
)
from calculators.perf.step_terms import (
    causal_pairs, moe_split, published_moe_split,
)
from calculators.perf.measured_tables import (
    DEFAULT_FRAMEWORK, FLAG_NAMES, FRAMEWORKS, Grid, LATENCY_UNIT_S, Located, MeasuredSystem, Rates, SHARED_TABLES,
    TABLES, TABLE_FORMAT, TABLE_PEAK,
    TABLE_SPELLING, activation_bytes, build_grid, clear_index, dtype_bytes, estimate, index_table, load_system,
    locate, rates_from_spec, rescaled, table_dtype, table_key,
)
from calculators.perf.measured import (
    AR_AXES, ATTN_CATS, CTX_AXES, GEN_AXES, MOE_AXES, MOE_CATS, allreduce_kernel, allreduce_latency,
    attention_kernel, context_attention_bound_s, context_attention_latency, flags_of, gemm_bound_s, gemm_kernel,
    gemm_latency, generation_attention_bound_s, generation_attention_latency, leave_one_out, moe_bound_s,
    moe_kernel, moe_latency,
)
from calculators.perf.measured_step import (
    NOT_MODELLED, StepEstimate, decode_step, prefill_step,
)
from calculators.perf.step_model import (
    ACT_BYTES, Op, STATE_BYTES, Split, StepOps, split_problems, step_ops, touched_experts, weight_bytes_per_rank,
)
from calculators.perf.step_eval import (
    Bound, COMM_KINDS, DUAL_STREAM_TOKENS, bound_of, dual_stream_hidden_s, measured_of, op_bound_s, runs_dual_stream,
)
from calculators.perf.measured_estimate import (
    ESTIMATE_FIELD, Estimate, FRAMEWORK_FIELD, MeasuredFramework, PROXY_MAX_RATIO, Proxy, estimate_system,
    kernel_source, measured_system_of, proxy_system_of, step_estimate,
)
from calculators.perf.measured_layers import (
    DSA_GEOMETRY, LayerKernels, MLA_MODULE_GEOMETRY, MlaGeometry, alltoall_kernel, linear_state_kernel, mla_core_kernel,
)
from calculators.perf.step_time import (
    LinkRates, StepTimes, collectives_s, step_times, tp_link,
)

__all__ = [
    'DEFAULT_FRAMEWORK', 'DSA_GEOMETRY', 'FRAMEWORKS', 'FRAMEWORK_FIELD', 'LayerKernels', 'MLA_MODULE_GEOMETRY',
    'MeasuredFramework', 'MlaGeometry', 'SHARED_TABLES', 'alltoall_kernel', 'linear_state_kernel', 'mla_core_kernel',
    'ACT_BYTES', 'Bound', 'COMM_KINDS', 'DUAL_STREAM_TOKENS', 'Op', 'STATE_BYTES', 'Split', 'StepOps', 'bound_of',
    'dual_stream_hidden_s', 'measured_of', 'op_bound_s', 'runs_dual_stream', 'split_problems', 'step_ops',
    'touched_experts', 'weight_bytes_per_rank',
    'LinkRates', 'StepTimes', 'collectives_s', 'step_times', 'tp_link',
    'AR_AXES', 'ATTN_CATS', 'Algorithm', 'BUS_FACTOR', 'CTX_AXES', 'ESTIMATE_FIELD', 'Estimate', 'FLAG_NAMES',
    'FORMULAS', 'GEN_AXES', 'Grid', 'LATENCY_UNIT_S', 'Label', 'Located', 'MOE_AXES', 'MOE_CATS', 'MeasuredSystem',
    'NOT_MODELLED', 'Operation', 'ROUNDS', 'Rates', 'StepEstimate', 'TABLES', 'TABLE_FORMAT', 'TABLE_PEAK',
    'TABLE_SPELLING', 'activation_bytes', 'allreduce_kernel', 'allreduce_latency', 'attention_kernel', 'build_grid',
    'causal_pairs', 'chunk_bytes', 'clear_index', 'collective_cost', 'context_attention_bound_s',
    'context_attention_latency', 'decode_step', 'dtype_bytes', 'estimate', 'flags_of', 'gemm_bound_s',
    'gemm_kernel', 'gemm_latency', 'generation_attention_bound_s', 'generation_attention_latency', 'index_table',
    'PROXY_MAX_RATIO', 'Proxy', 'kernel_source', 'proxy_system_of', 'estimate_system', 'leave_one_out', 'load_system', 'locate', 'measured_system_of', 'moe_bound_s', 'moe_kernel', 'moe_latency',
    'moe_split', 'prefill_step', 'published_moe_split', 'rates_from_spec', 'rescaled', 'resolve_link',
    'ring_allreduce_s', 'step_estimate', 'table_dtype', 'table_key',
]

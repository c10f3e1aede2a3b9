"""The domain layer: what the calculators know about the things they compute with.

Number formats (`formats`), hardware, links, prices and the one memory rule (`hardware`, `link_fit`), model
architectures and their KV and parameter ledgers (`architecture`), how a model name becomes a store id (`model_ids`), the layer layout of any model (`layout`), Hugging Face config readers (`hf_config` over
`hf_reader` and `hf_layouts`) and the request sub-models several calculators share (`requests`). Families and the
perf package import from this face; the modules behind it are private to the package.
"""
from __future__ import annotations

from calculators.domain.records import (
    ModelRecord, Record, TransientModel, TransientView, as_model, as_record, record,
)
from calculators.domain.formats import (
    ALIASES, FORMATS, FORMAT_HELP, Fmt, FormatField, FormatName, FormatSpec, SHIPPED, WeightFormats, bits_per_param,
    canonical_name, format_bytes, format_label, output_label, resolve_format, shipped_weight_formats,
)
from calculators.domain.hardware import (
    DEFAULT_MEMORY_UTILIZATION, DEFAULT_RUNTIME_RESERVE_BYTES, HARDWARE_KINDS, HardwareSpec, LinkSpec, MEMORY_RULE,
    PRECISIONS, hardware_architecture, hardware_kind,
    Peak, SCOPES, alpha_assumption, describe_fit, explain_memory_rule, figure_basis, hardware_rates, hardware_spec,
    link_spec, measured_link_fits, note_scope, per_device_value, spec_from_record, stored_device_price,
    usable_memory_bytes, PRICE_AS_OF_ENV, PRICE_RULE, PRICE_STALE_MONTHS, PriceChoice, choose_device_price, months_old,
    price_as_of, price_date, stale_cutoff,
)
from calculators.domain.link_fit import (
    AllReduceFit, DTYPE_BYTES, fit_all_reduce, fit_for, fit_line,
)
from calculators.domain.architecture import (
    Arch, COMPONENTS, GroupSpec, MODEL_CONFIG_FIELD, SHAPE_FIELDS, SPLIT_ATTENTION, Sizes, StreamSpec,
    arch_from_record, cache_bytes, entries_at, exact, group_lines, groups_from_architecture, groups_from_model,
    intify, kv_sizes, kv_source, ledger, model_record, record_from_hf_config, resolve_groups,
    written_bytes,
)
from calculators.domain.layout import (
    ATTENTION, COMPRESSED, KNOWN_ATTENTION, LINEAR, LINEAR_KINDS, Layout, MLA, Mixer, layout_from_arch, layout_ledger,
    layout_of, model_weight_bytes,
)
from calculators.domain.requests import (
    Architecture, Count, Dim, ExpertCount, HeadCount, HeadDim, Heads, LayerGroup, Layers, MLASpec, MoESpec,
    OptWidth, PosHeadDim, PricePerMtok, ShapeArchitecture, Stream, Vocab, Width, arch_from_request, resolve_arch,
)
from calculators.domain.hf_config import (
    ORDER, record_from_config,
)
from calculators.domain.model_sizes import MatrixParams, arch_matrix_params, matrix_params, weights_in_budget
from calculators.domain.model_ids import AmbiguousModelId, resolve_model, resolve_model_id

__all__ = [
    'HARDWARE_KINDS', 'hardware_architecture', 'hardware_kind',
    'ATTENTION', 'COMPRESSED', 'KNOWN_ATTENTION', 'LINEAR', 'LINEAR_KINDS', 'Layout', 'MLA', 'Mixer',
    'layout_from_arch', 'layout_ledger', 'layout_of',
    'AmbiguousModelId', 'resolve_model', 'resolve_model_id',
    'ALIASES', 'AllReduceFit', 'Arch', 'Architecture', 'COMPONENTS', 'Count', 'DEFAULT_MEMORY_UTILIZATION',
    'DEFAULT_RUNTIME_RESERVE_BYTES', 'DTYPE_BYTES', 'Dim', 'ExpertCount', 'FORMATS', 'FORMAT_HELP', 'Fmt',
    'FormatField', 'FormatName', 'FormatSpec', 'GroupSpec', 'HardwareSpec', 'HeadCount', 'HeadDim', 'Heads',
    'LayerGroup', 'Layers', 'LinkSpec', 'MEMORY_RULE', 'MLASpec', 'MatrixParams', 'arch_matrix_params', 'matrix_params', 'weights_in_budget', 'MODEL_CONFIG_FIELD', 'MoESpec', 'ModelRecord',
    'ORDER', 'OptWidth', 'PRECISIONS', 'Peak', 'PosHeadDim', 'PricePerMtok', 'Record', 'SCOPES', 'SHAPE_FIELDS',
    'SHIPPED', 'SPLIT_ATTENTION', 'ShapeArchitecture', 'Sizes', 'Stream', 'StreamSpec', 'TransientModel',
    'TransientView', 'Vocab', 'WeightFormats', 'Width', 'alpha_assumption', 'arch_from_record', 'arch_from_request',
    'as_model', 'as_record', 'bits_per_param', 'cache_bytes', 'canonical_name', 'describe_fit', 'entries_at',
    'exact', 'explain_memory_rule', 'figure_basis', 'fit_all_reduce', 'fit_for', 'fit_line', 'format_bytes',
    'format_label', 'group_lines', 'groups_from_architecture', 'groups_from_model', 'hardware_rates',
    'hardware_spec', 'intify', 'kv_sizes', 'kv_source', 'ledger', 'link_spec', 'measured_link_fits', 'model_record',
    'model_weight_bytes', 'note_scope', 'output_label', 'per_device_value', 'record', 'record_from_config',
    'record_from_hf_config', 'resolve_arch', 'resolve_format', 'resolve_groups', 'shipped_weight_formats',
    'spec_from_record', 'stored_device_price', 'usable_memory_bytes', 'written_bytes',
    'PRICE_AS_OF_ENV', 'PRICE_RULE', 'PRICE_STALE_MONTHS', 'PriceChoice', 'choose_device_price', 'months_old',
    'price_as_of', 'price_date', 'stale_cutoff',
]

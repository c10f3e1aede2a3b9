"""The framework every calculator is written in: requests, sweeps, results and steps, wire encoding, the
`Calculator` type, errors, and the facts lookup. Families import what they need from here, never from the
private modules behind it.

Front ends use three modules of this package by name: `registry` (the table of every calculator, found by
walking `calculators.families`), `runner` (validate, compute, typed errors) and `limits` (the cost model that
runs before any work); `headline` holds the formatters of one-sentence answers and `suggest` the did-you-mean.
"""
from __future__ import annotations

from calculators.framework.request import (
    CalcRequest, Fraction, FractionSweep, GB, GIB, IntPoints, KB, KIB, MAX_LIST_LENGTH, MAX_SWEEP_POINTS, MAX_VALUE,
    MB, MIB, NonNegFloat, NonNegFloatSweep, NonNegInt, NonNegIntSweep, Points, PosFloat, PosFloatSweep, PosInt,
    PosIntSweep, TB, TIB,
)
from calculators.framework.errors import CalcInputError, UnknownId
from calculators.framework.lookup import (
    fact_source, fact_value, fetch, IDS, ids_of, Lookup, no_lookup, RecordMemo, TransientRecord,
)
from calculators.framework.sweeps import (
    arr, broadcast, first, grid_axes, GRID_FIELD, grid_shape, is_sweep, jsonable, on_grid, out,
)
from calculators.framework.text import LIST_SEP, fmt_bytes, fmt_flops, fmt_rate, fmt_s, num, num_list
from calculators.framework.result import Result, Step, aligned, quiet, request_inputs, sum_list, whole_numbers
from calculators.framework.limits import Profile, Series, Work, checkpoint, list_series, request_value, sweep_length
from calculators.framework.outputs import OutCountSweep, OutNum, OutSweep, Outputs
from calculators.framework.calculator import Calculator, Chart

__all__ = [
    'CalcInputError', 'CalcRequest', 'Calculator', 'Chart', 'Fraction', 'FractionSweep', 'GB', 'GIB', 'GRID_FIELD',
    'IDS', 'IntPoints', 'KB', 'KIB', 'LIST_SEP', 'Lookup', 'MAX_LIST_LENGTH', 'MAX_SWEEP_POINTS', 'MAX_VALUE', 'MB', 'MIB',
    'NonNegFloat', 'OutCountSweep', 'OutNum', 'OutSweep', 'Outputs', 'NonNegFloatSweep', 'NonNegInt', 'NonNegIntSweep', 'Points', 'PosFloat', 'PosFloatSweep',
    'PosInt', 'PosIntSweep', 'Profile', 'RecordMemo', 'Series', 'list_series', 'request_value', 'sweep_length', 'Result', 'Step', 'TB', 'TIB', 'TransientRecord', 'UnknownId', 'Work', 'aligned',
    'arr', 'broadcast', 'checkpoint', 'fact_source', 'fact_value', 'fetch', 'first', 'fmt_bytes', 'fmt_flops', 'fmt_rate',
    'fmt_s', 'grid_axes', 'grid_shape', 'ids_of', 'is_sweep', 'jsonable', 'no_lookup', 'num', 'num_list', 'on_grid', 'out',
    'quiet', 'request_inputs', 'sum_list', 'whole_numbers',
]

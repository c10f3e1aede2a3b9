"""The framework every calculator is written in: requests, sweeps, results and steps, wire encoding, the
`Calculator` type, errors, and the facts lookup. Families import what they need from here, never from the
private modules behind it.

Front ends use three modules of this package by name: `registry` (the table of every calculator, found by
walking `calculators.families`), `runner` (validate, compute, typed errors) and `limits` (the cost model that
runs before any work); `headline` holds the formatters of one-sentence answers and `suggest` the did-you-mean.
"""
from __future__ import annotations

from calculators.framework.request import CalcRequest, Fraction, FractionSweep, GB, GIB, IntPoints, KB, KIB, MAX_LIST_LENGTH, MAX_SWEEP_POINTS, MAX_VALUE, MB, MIB, NonNegFloat, NonNegFloatSweep, NonNegInt, NonNegIntSweep, Points, PosFloat, PosFloatSweep, PosInt, PosIntSweep, TB, TIB, _sweep
from calculators.framework.errors import CalcInputError, UnknownId, kind_plural
from calculators.framework.lookup import IDS, Lookup, RecordMemo, TransientRecord, fact_source, fact_value, fetch, ids_of, no_lookup
from calculators.framework.sweeps import GRID_FIELD, arr, broadcast, first, grid_axes, grid_shape, is_sweep, jsonable, on_grid, out, _py
from calculators.framework.text import fmt_bytes, fmt_flops, fmt_rate, fmt_s, num
from calculators.framework.result import Result, Step, aligned, quiet, request_inputs, sum_list, whole_numbers
from calculators.framework.calculator import Calculator, Chart

__all__ = ['CalcInputError', 'CalcRequest', 'Calculator', 'Chart', 'Fraction', 'FractionSweep', 'GB', 'GIB', 'GRID_FIELD', 'IDS', 'IntPoints', 'KB', 'KIB', 'Lookup', 'MAX_LIST_LENGTH', 'MAX_SWEEP_POINTS', 'MAX_VALUE', 'MB', 'MIB', 'NonNegFloat', 'NonNegFloatSweep', 'NonNegInt', 'NonNegIntSweep', 'Points', 'PosFloat', 'PosFloatSweep', 'PosInt', 'PosIntSweep', 'RecordMemo', 'Result', 'Step', 'TB', 'TIB', 'TransientRecord', 'UnknownId', '_py', '_sweep', 'aligned', 'arr', 'broadcast', 'fact_source', 'fact_value', 'fetch', 'first', 'fmt_bytes', 'fmt_flops', 'fmt_rate', 'fmt_s', 'grid_axes', 'grid_shape', 'ids_of', 'is_sweep', 'jsonable', 'kind_plural', 'no_lookup', 'num', 'on_grid', 'out', 'quiet', 'request_inputs', 'sum_list', 'whole_numbers']

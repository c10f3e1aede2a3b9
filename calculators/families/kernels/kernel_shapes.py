"""Shapes a kernel sees: attention projection widths and shared-memory bank conflicts.

Two calculators:
- `attention-projections`: widths, parameters and FLOPs per token of the Q/K/V/O projections from heads ×
  head_dim (which need not equal the hidden size), including a grouped output projection (heads split into
  groups, each projected to its own width, concatenated, then projected to the hidden size).
- `bank-conflicts`: bytes of a 2-D tile in shared memory at a row pitch, and the service rounds of a warp reading
  one row or one column of it over B banks; padding the pitch removes column conflicts.
"""
from __future__ import annotations

from typing import Annotated

import numpy as np
from pydantic import Field

from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, Lookup, NonNegInt, out, Outputs, PosInt, quiet, request_inputs, Result,
)
from calculators.framework import headline as hf


# =========================================================================== attention projections

class AttentionProjectionRequest(CalcRequest):
    hidden_size: PosInt = Field(description="Model (residual) width d.", examples=[4096])
    heads: PosInt = Field(description="Query heads.", examples=[64])
    head_dim: PosInt = Field(description="Width of one head.", examples=[512])
    kv_heads: NonNegInt = Field(0, description="Key/value heads (GQA); 0 = as many as query heads.", examples=[8])
    output_groups: PosInt = Field(1, description="Groups of heads whose outputs are projected separately before the "
                                  "final output projection (1 = one dense O projection).", examples=[8])
    group_output_dim: PosInt | None = Field(None, description="Width each group is projected to (with output_groups > 1).",
                                            examples=[1024])


@quiet
def attention_compute(req: AttentionProjectionRequest, lookup: Lookup) -> Result:
    if req.heads % req.output_groups:
        raise CalcInputError("output_groups", f"must divide heads ({req.heads})")
    if req.output_groups > 1 and req.group_output_dim is None:
        raise CalcInputError("group_output_dim", "give the width each group is projected to")
    res = Result(inputs=request_inputs(req), outputs={})
    kvh = req.kv_heads or req.heads
    d = req.hidden_size
    q = res.step("query width", "heads × head_dim", f"{req.heads} × {req.head_dim}", req.heads * req.head_dim, "")
    kv = res.step("key (= value) width", "kv_heads × head_dim", f"{kvh} × {req.head_dim}", kvh * req.head_dim, "")
    o: dict = {"q_width": q, "kv_width": kv, "q_over_hidden": q / d}
    params = d * q + 2 * d * kv
    if req.output_groups > 1:
        g = req.output_groups
        per_in = res.step("input width per output group", "heads / groups × head_dim",
                          f"{req.heads}/{g} × {req.head_dim}", req.heads // g * req.head_dim, "")
        concat = res.step("concatenated group outputs", "groups × group_output_dim", f"{g} × {req.group_output_dim}",
                          g * req.group_output_dim, "")
        o_params = g * per_in * req.group_output_dim + concat * d
        o.update({"group_in_width": per_in, "group_concat_width": concat})
    else:
        o_params = q * d
    params += o_params
    o.update({"o_params": o_params, "params": params, "flops_per_token": 2 * params,
              "params_if_hidden_squared": 4 * d * d})
    res.step("projection parameters", "d·q + 2·d·kv + O", f"{d}·{q} + 2·{d}·{kv} + {o_params}", params, "parameters")
    res.outputs = out(o)
    res.assume("Biases, norms and LoRA-style low-rank Q/KV compressions are not counted; FLOPs = 2 × parameters per "
               "token (one multiply-add per weight).")
    res.headline = hf.sentence(f"{req.heads} heads × {req.head_dim} give a query width of {hf.fmt_count(q)} against a "
                               f"hidden size of {hf.fmt_count(d)} ({hf.fmt_num(q / d, 3)}×); the projections hold "
                               f"{hf.fmt_big(params)} parameters")
    return res


# =========================================================================== bank conflicts

class BankConflictRequest(CalcRequest):
    rows: Annotated[int, Field(ge=1, le=1 << 20)] = Field(description="Tile rows.", examples=[32])
    cols: Annotated[int, Field(ge=1, le=1 << 20)] = Field(description="Tile columns (elements used per row).", examples=[32])
    bytes_per_element: Annotated[int, Field(ge=1, le=64)] = Field(4, description="Bytes per element (FP32 = 4).", examples=[4])
    pitch_elements: list[PosInt] = Field(min_length=1, max_length=64, description="Row pitches to compare, in "
                                         "elements (≥ cols; cols + 1 is the usual padding).", examples=[[32, 33]])
    banks: Annotated[int, Field(ge=1, le=1024)] = Field(32, description="Shared-memory banks.", examples=[32])
    bank_bytes: Annotated[int, Field(ge=1, le=64)] = Field(4, description="Bytes per bank word.", examples=[4])
    threads: Annotated[int, Field(ge=1, le=1024)] = Field(32, description="Threads issuing one access together (a warp).", examples=[32])


def _rounds(addr_bytes: np.ndarray, eb: int, bank_bytes: int, banks: int) -> int:
    words = set()
    for a in addr_bytes.tolist():
        for w in range(a // bank_bytes, (a + eb - 1) // bank_bytes + 1):
            words.add(w)
    per_bank: dict[int, int] = {}
    for w in words:
        per_bank[w % banks] = per_bank.get(w % banks, 0) + 1
    return max(per_bank.values())


@quiet
def bank_compute(req: BankConflictRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    eb = req.bytes_per_element
    base = req.rows * req.cols * eb
    rows = []
    for j, p in enumerate(req.pitch_elements):
        if p < req.cols:
            raise CalcInputError(("pitch_elements", j), f"a pitch below cols ({req.cols}) overlaps rows")
        size = res.step(f"pitch {p}: tile bytes", "rows × pitch × bytes_per_element", f"{req.rows} × {p} × {eb}",
                        req.rows * p * eb, "B")
        t_row = np.arange(min(req.threads, req.cols))
        t_col = np.arange(min(req.threads, req.rows))
        row_r = _rounds(t_row * eb, eb, req.bank_bytes, req.banks)
        col_r = res.step(f"pitch {p}: column access rounds", "max distinct words per bank, thread t reads (t, 0)",
                         f"word(t) = t × {p} × {eb} / {req.bank_bytes} mod {req.banks}",
                         _rounds(t_col * p * eb, eb, req.bank_bytes, req.banks), "rounds")
        rows.append({"pitch_elements": p, "bytes": size, "row_rounds": row_r, "column_rounds": col_r,
                     "padding_bytes": size - base, "padding_fraction": (size - base) / base})
    res.outputs = out({"unpadded_bytes": base, "pitches": rows})
    res.assume("Threads of one access read consecutive elements of a row (row access) or of a column (column access); "
               "accesses to the same word are broadcast, distinct words in one bank are served in separate rounds.")
    best = min(rows, key=lambda r: (r["column_rounds"], r["bytes"]))
    res.headline = hf.sentence(
        "; ".join(f"pitch {r['pitch_elements']}: {hf.fmt_bytes(r['bytes'])}, rows in {hf.plural(r['row_rounds'], 'round')}, "
                  f"columns in {hf.plural(r['column_rounds'], 'round')}" for r in rows)
        + f" — pitch {best['pitch_elements']} is conflict-free at {hf.fmt_pct(best['padding_fraction'])} extra memory")
    return res


# =========================================================================== outputs

class AttentionProjectionsOutputs(Outputs):
    """Outputs of attention-projections: widths in values, parameters and FLOPs as whole counts."""

    q_width: int = Field(description="Query projection width, heads × head_dim.")
    kv_width: int = Field(description="Key (= value) projection width, kv_heads × head_dim.")
    q_over_hidden: float | None = Field(description="q_width / hidden (1 when the heads span the hidden size).")
    group_in_width: int | None = Field(None, description="Input width of each output group, heads/groups × head_dim "
                                       "(with output_groups > 1).")
    group_concat_width: int | None = Field(None, description="Width of the concatenated group outputs, groups × "
                                           "group_output_dim (with output_groups > 1).")
    o_params: int = Field(description="Parameters of the output projection (grouped or dense).")
    params: int = Field(description="Parameters of the Q, K, V and O projections.")
    flops_per_token: int = Field(description="2 × params, FLOP per token.")
    params_if_hidden_squared: int = Field(description="4 × hidden², the parameters if every projection were "
                                          "hidden × hidden, for comparison.")


class BankConflictPitchOut(Outputs):
    pitch_elements: int = Field(description="Row pitch, elements.")
    bytes: int = Field(description="Tile bytes at this pitch, rows × pitch × bytes_per_element, B.")
    row_rounds: int = Field(description="Bank service rounds of one warp reading along a row.")
    column_rounds: int = Field(description="Bank service rounds of one warp reading down a column (1 = no conflict).")
    padding_bytes: int = Field(description="Bytes above the unpadded tile, B.")
    padding_fraction: float | None = Field(description="padding_bytes / unpadded_bytes.")


class BankConflictsOutputs(Outputs):
    """Outputs of bank-conflicts (past 64 bits the JSON answer writes byte counts as floats)."""

    unpadded_bytes: int = Field(description="rows × cols × bytes_per_element, B.")
    pitches: list[BankConflictPitchOut] = Field(description="One row per requested pitch, in request order.")


CALCULATORS = [
    Calculator(
        name="attention-projections",
        family="other",
        title="Attention projection widths and parameters",
        summary="Q/K/V/O widths, parameters and FLOPs per token from heads × head_dim, which need not equal the hidden "
                "size, including a grouped output projection.",
        description="q = heads × head_dim; kv = kv_heads × head_dim; parameters = d·q + 2·d·kv + O, where O = q·d for a "
                    "dense output projection, or groups × (heads/groups × head_dim) × group_out + groups × group_out × d "
                    "for a grouped one. FLOPs/token = 2 × parameters. Compared with 4·d², the count that assumes q = d. "
                    "Limits: no biases, norms or low-rank Q/KV compression.",
        request_model=AttentionProjectionRequest,
        compute=attention_compute,
        outputs_model=AttentionProjectionsOutputs,
        example={"hidden_size": 4096, "heads": 64, "head_dim": 512, "kv_heads": 1, "output_groups": 8, "group_output_dim": 1024},
        cases=("model-operator-examples", "generative-multimodal-models"),
    ),
    Calculator(
        name="bank-conflicts",
        family="other",
        title="Shared-memory tile size and bank conflicts",
        summary="Bytes of a 2-D tile at a row pitch, and how many rounds a warp needs to read a row or a column over the "
                "shared-memory banks; padding the pitch removes column conflicts.",
        description="bytes = rows × pitch × bytes_per_element; bank of a word = word address mod banks; rounds = the largest "
                    "number of distinct words one bank must serve. With pitch = 32 FP32 words every element of a column "
                    "sits in one bank (32 rounds); pitch 33 spreads them (1 round) for 3.125 % more memory. Limits: one "
                    "access pattern, no swizzling.",
        request_model=BankConflictRequest,
        compute=bank_compute,
        outputs_model=BankConflictsOutputs,
        example={"rows": 32, "cols": 32, "bytes_per_element": 4, "pitch_elements": [32, 33]},
        cases=("buffer-capacity-and-data-movement",),
    ),
]

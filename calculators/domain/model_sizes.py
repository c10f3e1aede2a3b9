"""Two sizes of a model that several calculators need and must agree on.

- `matrix_params`: the parameters a token multiplies (forward FLOPs = 2 × these per token), from the record's
  shapes through `arch_from_record` + `ledger` (the active matrices: attention projections, dense FFN, the experts a
  token uses, shared experts, router; the LM head when asked), else the record's published active count. Prefill
  (prefix-cache) and training compute (training-compute) both count with it, so Llama-3.1-8B is the same N in both.
- `weights_in_budget`: the weight bytes a memory budget still holds, which a calculator takes out before it fits KV,
  adapters or anything else in the rest (kv-cache, kv-eviction, lora): the given bytes, else the model's weights in
  its published (or the requested) format, unless the request says its budget is already net (`subtract_weights`).
"""
from __future__ import annotations

from dataclasses import dataclass
from calculators.domain.architecture import Arch, arch_from_record, ledger
from calculators.domain.layout import model_weight_bytes
from calculators.framework import CalcInputError, Result, fmt_bytes, num


@dataclass(frozen=True)
class MatrixParams:
    """Parameters a token multiplies, and how they were counted."""

    total: float
    components: dict[str, float] | None     # per ledger component (None: the published count, not itemised)
    basis: str                              # a formula for the step that shows it


def matrix_params(rec, res: Result | None, include_lm_head: bool, loc: str = "model",
                  required: bool = True) -> MatrixParams | None:
    """The matrix parameters each token multiplies for a store (or config) model record.

    From the shapes where the record's attention has a ledger (MHA/GQA/MLA): the active matrices, plus the output
    projection with `include_lm_head` (its vocab × d multiplies every token that needs logits, tied or not). Else the
    record's published `params_active`, a label that counts the embeddings too (stated in the assumptions). None when
    neither is known and not `required`."""
    arch = arch_from_record(rec, res, loc)
    if arch is not None:
        return arch_matrix_params(arch, include_lm_head)
    value = rec.value("params_active", loc=loc, required=required)
    if value is None:
        return None
    if res is not None:
        res.cite(rec.source("params_active"))
        res.assume(f"{rec.id}: attention '{rec.attention}' is not itemised here, so N is the stored active parameter count "
                   "(a label, embeddings included).")
    return MatrixParams(float(value), None, "params_active (store)")


def arch_matrix_params(arch: Arch, include_lm_head: bool) -> MatrixParams:
    """`matrix_params` of explicit shapes (an `Arch`): the active matrices of its ledger, plus the LM head if asked."""
    led = ledger(arch)
    comp = {k: float(v) for k, v in led["active_matrix"].items()}
    comp["lm_head"] = float(led["head_matrix"]) if include_lm_head else 0.0
    return MatrixParams(sum(comp.values()), comp,
                        "attention + FFN + active experts + shared experts + router" + (" + LM head" if include_lm_head else ""))


def weights_in_budget(req, rec, res: Result, tp: int = 1, *, needed: bool = False, bytes_field: str = "weight_bytes",
                      format_field: str = "weight_format") -> float | None:
    """The weight bytes a request's memory budget still holds (to take out of it), or None when the budget is net.

    `req.subtract_weights` decides: false, the budget is already net (giving weights too is refused); true, the
    weights must be known; unset (None), they are taken out whenever they are known: `bytes_field` when given, else the
    model's weights (`model_weight_bytes`, in `format_field` or the published format). `needed`: the budget is device
    memory (a hardware id), which surely holds the weights, so they must be known unless the request says otherwise.
    Under tensor parallelism (`tp` ranks) the step shows the share of one rank."""
    subtract = getattr(req, "subtract_weights", None)
    given_bytes = getattr(req, bytes_field, None)
    given_format = getattr(req, format_field, None)
    if subtract is False:
        for field, value in ((bytes_field, given_bytes), (format_field, given_format)):
            if value is not None:
                raise CalcInputError(field, "not used with subtract_weights: false (the budget is already net of the weights)")
        res.assume("subtract_weights is false: the whole budget is taken as free for what is sized here (already net of "
                   "the weights).")
        return None
    if given_bytes is not None:
        if given_format is not None:
            raise CalcInputError(format_field, f"give `{bytes_field}` or `{format_field}`, not both")
        weights = float(given_bytes)
        res.step("weights", "given", fmt_bytes(weights), weights, "B")
    elif rec is not None:
        weights = float(model_weight_bytes(rec, given_format, res, format_field))
    else:
        if subtract or needed:
            raise CalcInputError(bytes_field, f"an explicit shape has no weights to subtract: give `{bytes_field}` (0 if "
                                 "none), or subtract_weights: false when the budget is already net")
        if given_format is not None:
            raise CalcInputError(format_field, f"an explicit shape has no parameter count: give `{bytes_field}`")
        res.assume("No model is named, so no weights are known: the budget is taken as free for what is sized here "
                   f"(give `{bytes_field}` to subtract weights).")
        return None
    if tp > 1:
        res.step("weights per rank", "W / TP (weights split evenly over the ranks)", f"{fmt_bytes(weights)} / {num(tp)}",
                 weights / tp, "B")
    return weights


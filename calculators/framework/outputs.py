"""What a calculator's typed outputs model is built from: the `Outputs` base (an undocumented key is refused) and the
number types its fields take. Any computed number may overflow to null on extreme inputs, and a swept input turns a
number into a list of them, so the types say so once here rather than in every family."""
from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Outputs(BaseModel):
    """Base of every outputs model (and of the objects nested in one): exactly the documented keys."""

    model_config = ConfigDict(extra="forbid")


#: a computed number (null when it overflows or is undefined)
OutNum = float | None
#: a computed number, or one per point of a sweep
OutSweep = float | None | list[float | None]
#: a whole count, which is written as a float past 2^53 (null when not finite), or one per point of a sweep
OutCountSweep = int | float | None | list[int | float | None]

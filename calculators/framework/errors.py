"""The errors a calculator raises: `CalcInputError` names the field that cannot be computed; `UnknownId` is an
id the lookup does not hold. They carry data (field, kind, id), never a URL: front ends word the pointer."""
from __future__ import annotations

from typing import Sequence


class CalcInputError(ValueError):
    """A request that validates by type but cannot be computed; `loc` names the field."""

    def __init__(self, loc: Sequence[str | int] | str, message: str, status: int = 422):
        self.loc = (loc,) if isinstance(loc, str) else tuple(loc)
        self.message = message
        self.status = status
        super().__init__(f"{'.'.join(map(str, self.loc))}: {message}")


class UnknownId(CalcInputError):
    """A request names an id the store does not hold (front ends add the closest ids: see `ids_of`)."""

    def __init__(self, loc: Sequence[str | int] | str, kind: str, ident: str):
        self.kind = kind
        self.ident = ident
        super().__init__(loc, f"unknown {kind} id {ident!r}")

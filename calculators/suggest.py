"""Did-you-mean: the known names closest to one a user typed, for error messages that say how to fix."""
from __future__ import annotations

import difflib
from typing import Iterable


def close_matches(word: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.5) -> list[str]:
    """Up to `n` of `choices` nearest to `word`: prefix/substring matches first (`h100` -> `h100-sxm`),
    then difflib's ratio above `cutoff`; case-insensitive, order of closeness."""
    options = list(dict.fromkeys(str(c) for c in choices))
    low = word.strip().lower()
    if not low:
        return []
    lowered = {c.lower(): c for c in options}
    found: list[str] = []
    if low in lowered:
        found.append(lowered[low])
    found += sorted((c for c in options if c.lower().startswith(low) and c not in found), key=len)
    found += sorted((c for c in options if low in c.lower() and c not in found), key=len)
    for m in difflib.get_close_matches(low, list(lowered), n=n, cutoff=cutoff):
        if lowered[m] not in found:
            found.append(lowered[m])
    return found[:n]


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """' Did you mean 'a' or 'b'?' (with a leading space), or '' when nothing is close."""
    found = close_matches(word, choices, n)
    if not found:
        return ""
    quoted = [repr(f) for f in found]
    return " Did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"

"""Did-you-mean: the known names closest to one a user typed, for error messages that say how to fix."""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


def close_matches(word: str, choices: Iterable[str], n: int = 3, cutoff: float = 0.5) -> list[str]:
    """Up to `n` of `choices` nearest to `word`, case-insensitive: candidates are the ids that start
    with or contain it and difflib's close spellings; an exact match ranks first, then prefix matches
    (`h100` -> `h100-sxm`), then the closest spelling (`llama-70b` -> `llama-3.1-70b` before the
    longer id that merely contains it)."""
    options = list(dict.fromkeys(str(c) for c in choices))
    low = word.strip().lower()
    if not low:
        return []
    lowered = {c.lower(): c for c in options}
    found = [c for c in options if low in c.lower()]
    found += [lowered[m] for m in difflib.get_close_matches(low, list(lowered), n=n + 3, cutoff=cutoff)]
    found = list(dict.fromkeys(found))
    found.sort(key=lambda c: (c.lower() != low, not c.lower().startswith(low),
                              -difflib.SequenceMatcher(None, low, c.lower()).ratio(), len(c)))
    return found[:n]


def phrase(found: Sequence[str]) -> str:
    """' Did you mean 'a', 'b' or 'c'?' (with a leading space) for up to three names, or '' for none."""
    quoted = [repr(f) for f in list(found)[:3]]
    if not quoted:
        return ""
    return " Did you mean " + (quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]) + "?"


def did_you_mean(word: str, choices: Iterable[str], n: int = 3) -> str:
    """`phrase` of the names closest to `word`, or '' when nothing is close."""
    return phrase(close_matches(word, choices, n))

"""Lists of numbers read as lists: each number has a thousands comma every three digits, so the items are kept
apart by "; " (calculators.framework.LIST_SEP) on pages, in Markdown answers and in text, never by ", "
(which printed "10,200,000,000, 652,800,000,000": two numbers or four?)."""
from __future__ import annotations

import re

from api.markdown import inline, outputs_markdown
from api.urls import urls
from calculators.framework import LIST_SEP, num_list

BOTH = "10,200,000,000; 652,800,000,000"
COLLIDED = re.compile(r"\d,\d{3}, \d")   # a thousands group followed by ", " and the next number


def test_the_list_separator_cannot_be_read_as_a_thousands_comma():
    assert LIST_SEP.strip() and "," not in LIST_SEP
    assert num_list([10_200_000_000, 652_800_000_000]) == BOTH


def test_markdown_lists_objects_and_summaries():
    assert inline([10_200_000_000, 652_800_000_000]) == BOTH
    # inside an object's `k: v; …` line a list is bracketed, so its "; " is not the object's
    assert inline({"sizes": [10_200_000_000, 652_800_000_000], "n": 2}) == f"sizes: [{BOTH}]; n: 2"
    long = inline([10_200_000_000 * k for k in range(1, 20)])
    assert "min 10,200,000,000; max 193,800,000,000" in long and not COLLIDED.search(long)
    md = outputs_markdown({"weight_bytes": [10_200_000_000, 652_800_000_000]})   # each item with its unit
    assert "10,200,000,000 B = " in md and not COLLIDED.search(md) and "; 652,800,000,000 B = " in md


def _list_cell(html: str, path: str) -> str:
    m = re.search(rf'<td class="num" data-path="{re.escape(path)}" data-value="\[[^"]*\]" colspan="2">(.*?)</td>', html, re.DOTALL)
    assert m, f"no list row for {path}"
    return re.sub(r"<[^>]+>", "", m.group(1)).strip()


def test_pages_and_markdown_answers_of_a_sweep(client):
    body = {"model": "qwen3-8b", "tokens": [65536, 131072, 4194304]}
    r = client.get(urls.calculator("kv-cache", body))
    assert r.status_code == 200, r.text[:300]
    text = _list_cell(r.text, "bytes_per_request")
    items = text.split(LIST_SEP)
    assert len(items) == 3 and all(re.fullmatch(r"\d{1,3}(,\d{3})+", i) for i in items), text
    assert not COLLIDED.search(text)
    md = client.get(urls.calculator("kv-cache", body, format="md"))
    assert md.status_code == 200
    line = next(ln for ln in md.text.splitlines() if "**bytes_per_request**" in ln)
    assert line.count(LIST_SEP) == 2 and not COLLIDED.search(line), line

"""`Accept: text/markdown` answers are Markdown: headline first, values rendered (yes/no, —, units, tables), never
Python reprs (issue 13, part 4)."""
from __future__ import annotations

import re

import pytest

from api.markdown import block, inline, outputs_markdown, render_markdown, scalar, table
from calculators.framework.registry import REGISTRY
from api.envelope import run

#: Python reprs that must not reach a Markdown answer.
REPRS = re.compile(r"\b(True|False|None)\b|\{'|\['")


def prose(md: str) -> str:
    """The Markdown with fenced code blocks and inline code spans removed (reprs there would be quoted on purpose)."""
    md = re.sub(r"^```.*?^```", "", md, flags=re.S | re.M)
    # inline code spans: a run of n backticks up to the next run of exactly n backticks
    return re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", md, flags=re.S)


def test_prose_strips_code_only():
    assert REPRS.search(prose("a `None` b ``x `True` y`` c")) is None
    assert REPRS.search(prose("```\n{'a': 1}\n```\nok")) is None
    assert REPRS.search(prose("`x` then None")) is not None
    assert REPRS.search(prose("value ['a']")) is not None


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_markdown_starts_with_the_headline_and_has_no_python_reprs(name, lookup):
    env = run(name, REGISTRY[name].example, lookup)
    md = render_markdown(env, REGISTRY[name])
    assert env["headline"]
    assert md.splitlines()[0] == f"**{env['headline']}**"
    hits = [m.group(0) + " in …" + prose(md)[max(0, m.start() - 60):m.end() + 20] for m in REPRS.finditer(prose(md))]
    assert not hits, hits
    assert "## Steps" in md and "| step |" in md


def test_markdown_over_http_starts_with_the_headline(client):
    body = {"model": "qwen3-8b", "format": "fp8", "devices": 2, "memory_per_device_bytes": 80e9}
    r = client.post("/api/v1/calculators/weight-memory", json=body, headers={"Accept": "text/markdown"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/markdown")
    env = client.post("/api/v1/calculators/weight-memory", json=body).json()
    assert r.text.startswith(f"**{env['headline']}**\n")
    assert "- **fits**: yes" in r.text
    assert REPRS.search(prose(r.text)) is None


def test_values_render_as_markdown():
    assert scalar(True) == "yes" and scalar(False) == "no" and scalar(None) == "—"
    assert scalar(21.47e9, "weight_bytes") == "21,470,000,000 B = 21.5 GB (20.0 GiB)"
    assert scalar(0.0032, "time_s") == "0.0032 s = 3.2 ms"
    assert scalar(12.5, "cost_usd") == "$12.50"
    assert scalar(3.0, "accepted_samples_per_s") == "3/s"
    assert scalar(3.35e12, "memory_bandwidth_bytes_per_s").endswith("= 3.35 TB/s")
    assert scalar(float("inf")) == "∞" and scalar(float("nan")) == "—"
    assert inline([1, 2, None, True]) == "1; 2; —; yes"   # "; " apart: numbers have thousands commas
    assert inline(list(range(100)), "x").startswith("100 values: 0 … 99")
    assert inline({"a": None, "b": [1, 2]}) == "a: —; b: [1; 2]"
    assert inline([]) == "none"


def test_records_become_tables_and_objects_nested_lists():
    t = table([{"tp": 1, "fits": True}, {"tp": 2, "fits": False, "note": "a|b"}])
    lines = t.splitlines()
    assert lines[0] == "| tp | fits | note |" and lines[1] == "| --- | --- | --- |"
    assert lines[2] == "| 1 | yes | — |" and lines[3] == "| 2 | no | a\\|b |"
    md = outputs_markdown({"plan": {"best": {"tp": 2, "ok": None}, "rows": [{"a": 1}]}, "n": 3})
    assert "- **plan**:\n  - **best**:\n    - **tp**: 2\n    - **ok**: —" in md
    assert "  - **rows**:\n\n    | a |" in md
    assert md.rstrip().endswith("- **n**: 3")
    assert block("x", {"y": {"z": {"w": {"v": {"u": 1}}}}}).count("- **") == 5   # deep values go inline
    assert REPRS.search(md) is None

"""max-flow: the book's pipeline bound, max-flow = min-cut on random graphs, a brute-force cut check, validation."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st
from pydantic import ValidationError

from calculators.framework import CalcInputError, no_lookup
from calculators.families.network.max_flow import MAX_EDGES, MAX_NODES, max_flow
from tests.calculators.plain import compute as run


def calc(body):
    return run("max-flow", body, no_lookup)[2].outputs


def pipeline(k: float) -> dict:
    """The book's four-node pipeline: stage A's rate, a local and a cross link side by side, stage B's rate."""
    return {"source": "in", "sink": "out",
            "edges": [{"from_node": "in", "to_node": "A", "capacity": 14000},
                      {"from_node": "A", "to_node": "B", "capacity": 10000, "label": "local"},
                      {"from_node": "A", "to_node": "B", "capacity": k, "label": "cross"},
                      {"from_node": "B", "to_node": "out", "capacity": 14000}]}


def test_pipeline_bound_is_min_of_stage_and_both_links():
    o = calc(pipeline(2000))
    assert o["max_flow"] == pytest.approx(12000)
    assert o["min_cut_capacity"] == pytest.approx(12000)
    assert sorted(c["label"] for c in o["min_cut"]) == ["cross", "local"]
    assert o["source_side"] == ["in", "A"]
    assert [e["saturated"] for e in o["edges"]] == [False, True, True, False]


def test_pipeline_wrong_reading_is_capped_by_the_stages():
    o = calc(pipeline(4000))
    assert o["max_flow"] == pytest.approx(14000)
    assert o["min_cut_capacity"] == pytest.approx(14000)
    assert len(o["min_cut"]) == 1 and o["min_cut"][0]["capacity"] == 14000


def test_classic_graph_with_a_back_edge():
    # CLRS figure 26.1: max flow 23
    edges = [("s", "v1", 16), ("s", "v2", 13), ("v2", "v1", 4), ("v1", "v3", 12), ("v3", "v2", 9), ("v2", "v4", 14),
             ("v4", "v3", 7), ("v3", "t", 20), ("v4", "t", 4)]
    o = calc({"source": "s", "sink": "t", "edges": [{"from_node": a, "to_node": b, "capacity": c} for a, b, c in edges]})
    assert o["max_flow"] == pytest.approx(23)
    flow = {(e["from_node"], e["to_node"]): e["flow"] for e in o["edges"]}
    for node in ("v1", "v2", "v3", "v4"):  # conservation at every inner node
        assert sum(f for (a, b), f in flow.items() if b == node) == pytest.approx(
            sum(f for (a, b), f in flow.items() if a == node))


def test_unreachable_sink_gives_zero_and_an_empty_cut():
    o = calc({"source": "a", "sink": "d", "edges": [{"from_node": "a", "to_node": "b", "capacity": 5},
                                                     {"from_node": "d", "to_node": "c", "capacity": 5}]})
    assert o["max_flow"] == 0 and o["min_cut"] == [] and o["min_cut_capacity"] == 0


def brute_min_cut(n: int, edges: list[tuple[int, int, float]]) -> float:
    """The smallest cut over every subset of inner nodes on the source side (small graphs only)."""
    best = float("inf")
    inner = list(range(1, n - 1))
    for r in range(len(inner) + 1):
        for side in itertools.combinations(inner, r):
            S = {0, *side}
            best = min(best, sum(c for u, v, c in edges if u in S and v not in S))
    return best


@settings(max_examples=120, deadline=None)
@given(n=st.integers(2, 6), data=st.data())
def test_max_flow_equals_the_brute_force_min_cut(n, data):
    m = data.draw(st.integers(1, 14))
    edges = [(data.draw(st.integers(0, n - 1)), data.draw(st.integers(0, n - 1)), float(data.draw(st.integers(0, 20))))
             for _ in range(m)]
    value, flows, reach = max_flow(n, edges, 0, n - 1)
    assert value == pytest.approx(brute_min_cut(n, edges), abs=1e-9)
    assert all(-1e-9 <= f <= c + 1e-9 for (_, _, c), f in zip(edges, flows))
    assert reach[0] and not reach[n - 1]


def test_validation_names_the_field():
    with pytest.raises(CalcInputError) as e:
        calc({"source": "x", "sink": "out", "edges": pipeline(1)["edges"]})
    assert e.value.loc == ("source",)
    with pytest.raises(CalcInputError) as e:
        calc({"source": "in", "sink": "in", "edges": pipeline(1)["edges"]})
    assert e.value.loc == ("sink",)
    with pytest.raises(ValidationError):
        calc({"source": "in", "sink": "out", "edges": [{"from_node": "in", "to_node": "out", "capacity": -1}]})
    with pytest.raises(ValidationError):
        calc({"source": "in", "sink": "out", "edges": []})


def test_input_size_is_bounded():
    too_many = [{"from_node": "in", "to_node": "out", "capacity": 1}] * (MAX_EDGES + 1)
    with pytest.raises(ValidationError):
        calc({"source": "in", "sink": "out", "edges": too_many})
    chain = [{"from_node": f"n{i}", "to_node": f"n{i + 1}", "capacity": 1} for i in range(MAX_NODES)]
    with pytest.raises(CalcInputError) as e:
        calc({"source": "n0", "sink": f"n{MAX_NODES}", "edges": chain})
    assert e.value.loc == ("edges",) and e.value.status == 413

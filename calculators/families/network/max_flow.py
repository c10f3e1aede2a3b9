"""Max flow through a small capacity graph, and the min cut that sets it.

One calculator, `max-flow`: nodes joined by directed edges with capacities (tokens/s, bytes/s, requests/s —
any one unit), a source and a sink. The answer is the largest steady rate from source to sink that no edge
exceeds, which edges carry it, and a minimum cut: the edges from the source side to the sink side, whose
capacities add up to the same number (max-flow = min-cut). The book uses it to bound the rate a pipeline's
stages and links can sustain together, e.g. min(first stage, local link + cross link).

Method: Dinic's algorithm (BFS levels, then blocking flows along them) on the residual graph; parallel edges
are kept apart. Input is capped (`MAX_NODES`, `MAX_EDGES`) so one request stays cheap.
"""
from __future__ import annotations

from collections import deque
from typing import Annotated

from pydantic import Field

from calculators.framework import (
    CalcInputError, CalcRequest, Calculator, Lookup, NonNegFloat, num, out, Outputs, request_inputs, Result,
)
from calculators.framework import headline as hf

MAX_NODES = 100
MAX_EDGES = 500
#: flows below this share of the largest capacity count as zero (float round-off of augmenting paths)
EPS = 1e-12

NodeName = Annotated[str, Field(min_length=1, max_length=60)]


class Edge(CalcRequest):
    """A directed edge with the most it can carry per unit of time."""

    from_node: NodeName = Field(description="Node the edge leaves.", examples=["stage A"])
    to_node: NodeName = Field(description="Node the edge enters.", examples=["stage B"])
    capacity: NonNegFloat = Field(description="The most the edge carries (any one rate unit for the whole graph).",
                                  examples=[10000])
    label: str | None = Field(None, max_length=100, description="Name of the edge (a link, a stage), for the answer.")


class MaxFlowRequest(CalcRequest):
    """A capacity graph: directed edges, a source and a sink."""

    edges: Annotated[list[Edge], Field(min_length=1, max_length=MAX_EDGES)] = Field(
        description=f"Directed edges with capacities (at most {MAX_EDGES}); parallel edges are allowed.")
    source: NodeName = Field(description="Where the flow starts.", examples=["in"])
    sink: NodeName = Field(description="Where the flow ends.", examples=["out"])


def max_flow(n: int, edges: list[tuple[int, int, float]], s: int, t: int) -> tuple[float, list[float], list[bool]]:
    """Dinic's max flow: the flow value, the flow on each edge and which nodes the source still reaches in the
    residual graph (the source side of a minimum cut)."""
    # residual arcs: arc 2i is edge i forward, 2i+1 its reverse
    head: list[list[int]] = [[] for _ in range(n)]
    to: list[int] = []
    cap: list[float] = []
    for u, v, c in edges:
        head[u].append(len(to)); to.append(v); cap.append(float(c))
        head[v].append(len(to)); to.append(u); cap.append(0.0)
    scale = max((c for _, _, c in edges), default=0.0)
    eps = EPS * max(scale, 1.0)
    total = 0.0

    def levels() -> list[int]:
        level = [-1] * n
        level[s] = 0
        q = deque([s])
        while q:
            u = q.popleft()
            for a in head[u]:
                if cap[a] > eps and level[to[a]] < 0:
                    level[to[a]] = level[u] + 1
                    q.append(to[a])
        return level

    while True:
        level = levels()
        if level[t] < 0:
            break
        it = [0] * n
        while True:  # blocking flow: iterative DFS along increasing levels
            path: list[int] = []
            u = s
            while u != t:
                advanced = False
                while it[u] < len(head[u]):
                    a = head[u][it[u]]
                    if cap[a] > eps and level[to[a]] == level[u] + 1:
                        path.append(a)
                        u = to[a]
                        advanced = True
                        break
                    it[u] += 1
                if not advanced:
                    if u == s:
                        break
                    level[u] = -1  # dead end: never visit again in this phase
                    a = path.pop()
                    u = to[a ^ 1]
                    it[u] += 1
            if u != t:
                break
            push = min(cap[a] for a in path)
            for a in path:
                cap[a] -= push
                cap[a ^ 1] += push
            total += push
    flows = [cap[2 * i + 1] for i in range(len(edges))]
    reach = [lv >= 0 for lv in levels()]
    return total, flows, reach


def compute(req: MaxFlowRequest, lookup: Lookup) -> Result:
    res = Result(inputs=request_inputs(req), outputs={})
    names: list[str] = []
    index: dict[str, int] = {}
    for e in req.edges:
        for nm in (e.from_node, e.to_node):
            if nm not in index:
                index[nm] = len(names)
                names.append(nm)
    if len(names) > MAX_NODES:
        raise CalcInputError("edges", f"the graph has {len(names)} nodes; at most {MAX_NODES}", status=413)
    if req.source == req.sink:
        raise CalcInputError("sink", "source and sink must differ")
    for field, nm in (("source", req.source), ("sink", req.sink)):
        if nm not in index:
            raise CalcInputError(field, f"{nm!r} is not a node of any edge")
    arcs = [(index[e.from_node], index[e.to_node], e.capacity) for e in req.edges]
    value, flows, reach = max_flow(len(names), arcs, index[req.source], index[req.sink])
    cut = [i for i, (u, v, _) in enumerate(arcs) if reach[u] and not reach[v]]
    cut_total = sum(arcs[i][2] for i in cut)

    def edge_name(i: int) -> str:
        e = req.edges[i]
        return e.label or f"{e.from_node}→{e.to_node}"

    res.step("maximum flow", "largest source→sink rate with every edge within its capacity (Dinic)",
             f"{len(names)} nodes, {len(arcs)} edges", value, "rate")
    res.step("minimum cut", "Σ capacities of the edges from the source side to the sink side (= maximum flow)",
             " + ".join(f"{edge_name(i)} {num(arcs[i][2])}" for i in cut) or "no edge", cut_total, "rate")
    res.outputs = out({
        "max_flow": value,
        "min_cut_capacity": cut_total,
        "min_cut": [{"from_node": req.edges[i].from_node, "to_node": req.edges[i].to_node, "label": req.edges[i].label,
                     "capacity": arcs[i][2]} for i in cut],
        "source_side": [nm for nm in names if reach[index[nm]]],
        "edges": [{"from_node": e.from_node, "to_node": e.to_node, "label": e.label, "capacity": e.capacity, "flow": f,
                   "saturated": e.capacity - f <= EPS * max(e.capacity, 1.0)} for e, f in zip(req.edges, flows)],
    })
    res.assume("A steady fluid flow: every edge carries at most its capacity and every inner node passes on what "
               "it receives; no latency, queueing, packet sizes or routing constraints beyond the graph.")
    res.headline = hf.sentence(
        f"At most {hf.fmt_num(value)} per unit of time gets from {req.source} to {req.sink}; the minimum cut is "
        + (", ".join(edge_name(i) for i in cut) or "empty"))
    return res


class MaxFlowCutEdgeOut(Outputs):
    from_node: str = Field(description="Node on the source side the edge leaves.")
    to_node: str = Field(description="Node on the sink side the edge enters.")
    label: str | None = Field(description="The edge's label, as given.")
    capacity: float | None = Field(description="The edge's capacity, in the graph's rate unit.")


class MaxFlowEdgeOut(Outputs):
    from_node: str = Field(description="Node the edge leaves.")
    to_node: str = Field(description="Node the edge enters.")
    label: str | None = Field(description="The edge's label, as given.")
    capacity: float | None = Field(description="The edge's capacity, in the graph's rate unit.")
    flow: float | None = Field(description="Flow the edge carries in the maximum flow found, in the graph's rate unit.")
    saturated: bool = Field(description="The flow fills the capacity (to round-off).")


class MaxFlowOutputs(Outputs):
    """Outputs of max-flow; rates are in the one unit of the edge capacities (tokens/s, B/s …)."""

    max_flow: float | None = Field(description="Largest steady source → sink rate, in the graph's rate unit.")
    min_cut_capacity: float | None = Field(description="Sum of the capacities of the minimum cut (equal to max_flow).")
    min_cut: list[MaxFlowCutEdgeOut] = Field(description="Edges from the source side to the sink side of a minimum cut.")
    source_side: list[str] = Field(description="Nodes the source still reaches in the residual graph (the cut's "
                                   "source side), in order of first appearance.")
    edges: list[MaxFlowEdgeOut] = Field(description="Every edge with its flow, in request order.")


CALCULATORS = [
    Calculator(
        name="max-flow",
        family="network",
        title="Max flow and min cut of a capacity graph",
        summary="The largest steady rate from a source to a sink through directed edges with capacities (stages, "
                "links, pools), which edges carry it, and the minimum cut that bounds it.",
        description="Dinic's algorithm on the residual graph: the maximum flow equals the capacity of a minimum cut "
                    "(the edges from the nodes the source still reaches to the rest). Parallel edges are kept apart, "
                    "so a local and a cross link between the same stages add up. Limits: a steady fluid bound, one "
                    f"rate unit for all edges, at most {MAX_NODES} nodes and {MAX_EDGES} edges.",
        request_model=MaxFlowRequest,
        compute=compute,
        outputs_model=MaxFlowOutputs,
        example={"source": "in", "sink": "out",
                 "edges": [{"from_node": "in", "to_node": "stage A", "capacity": 14000, "label": "stage A rate"},
                           {"from_node": "stage A", "to_node": "stage B", "capacity": 10000, "label": "local link"},
                           {"from_node": "stage A", "to_node": "stage B", "capacity": 2000, "label": "cross link"},
                           {"from_node": "stage B", "to_node": "out", "capacity": 14000, "label": "stage B rate"}]},
        cases=("model-parallelism",),
    ),
]

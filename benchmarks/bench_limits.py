"""Calibrate the cost model of `calculators/framework/limits.py`: per calculator, the CPU seconds, peak memory and answer
bytes of one point-evaluation, measured on its worst case (the longest sweep it takes, with the most `what_if`
variants it accepts), and the requests the limits then allow.

Each calculator's example becomes a sweep of N points on its first sweepable field (as in bench_calculators),
with every `what_if` list tiled to its maximum length. CPU is `time.process_time` around validation, compute,
envelope and JSON encoding (the work a request costs); memory is the tracemalloc peak of the same (NumPy
reports its buffers to it); the answer is the encoded JSON. Limits are switched off while measuring.

With `--healthz`: how long /healthz takes (in-process app, one event loop, as in one server worker) while a
calculation of about 2 s of CPU runs in the calculation pool: polled every 20 ms, median and worst printed.

Run: `.venv/bin/python benchmarks/bench_limits.py [N]` (default 20,000 points; figures vary with machine load),
`.venv/bin/python benchmarks/bench_limits.py --healthz`.
"""
from __future__ import annotations

import copy
import os
import sys
import time
import tracemalloc
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

for _name in ("EVALUATIONS", "CPU_S", "MEMORY_BYTES", "ANSWER_BYTES"):
    os.environ["CASEBOOK_LIMIT_" + _name] = "1e18"

from api.responses import dumps
from benchmarks.bench_calculators import sweep_body
from calculators.framework import limits
from calculators.framework import CalcInputError
from calculators.framework.registry import REGISTRY
from api.envelope import run
from calculators.framework.runner import RunError
from knowledge.loader import catalog_lookup, default_catalog


def widest(calc, body: dict) -> dict:
    """`body` with its what_if list tiled to the most variants the request model accepts."""
    info = calc.request_model.model_fields.get("what_if")
    given = body.get("what_if") or next((e["what_if"] for e in (calc.example, *calc.extra_examples)
                                         if e.get("what_if")), [])
    if info is None or not given:
        return body
    most = next((m.max_length for m in info.metadata if getattr(m, "max_length", None)), len(given))
    body = copy.deepcopy(body)
    body["what_if"] = [dict(given[i % len(given)], label=f"variant {i + 1}") for i in range(most)]
    return body


def special(name: str, calc, n: int) -> dict | None:
    """Worst cases the generic sweep does not reach: the routing-cost candidates' own hit-rate sweeps (× every
    pair), and a deployment plan over many configurations."""
    body = copy.deepcopy(calc.example)
    if name == "routing-cost":
        body.pop("cascade", None)
        cands = body["candidates"]
        body["candidates"] = [dict(cands[i % len(cands)], name=f"c{i}",
                                   prefix_hit_rate=[(j % 100) / 100 for j in range(max(n // 20, 1))]) for i in range(5)]
        return body
    if name == "deployment-plan":
        return dict(body, tp=[1, 2, 4, 8], pp=[1, 2], batch=list(range(1, max(n // 24, 2) + 1)))
    return None


def measure(name: str, body: dict, lookup) -> tuple[float, float, float]:
    """(CPU seconds, peak bytes, answer bytes) of one request, validation to encoded answer (after a warm-up run
    that loads what the calculator caches, e.g. measured tables)."""
    dumps(run(name, body, lookup))
    t0 = time.process_time()
    answer = dumps(run(name, body, lookup))
    cpu = time.process_time() - t0
    tracemalloc.start()
    dumps(run(name, body, lookup))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return cpu, float(peak), float(len(answer))


def healthz_beside_a_long_calculation() -> None:
    """Poll /healthz while a ~2 s calculation runs in the pool; print its latencies and the calculation's time."""
    import statistics
    import tempfile
    import threading

    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.settings import Settings
    from knowledge.build import build

    db = Path(tempfile.mkdtemp()) / "bench.duckdb"
    build(db)
    body = copy.deepcopy(REGISTRY["parallel-split"].example)
    body["tp"] = [1 + i % 8 for i in range(100_000)]
    body["what_if"] = [{"label": f"v{i}", "link_alpha_s": 1e-6 * (i + 1)} for i in range(4)]
    with TestClient(create_app(Settings(db_path=db, build_if_stale=False))) as client:
        client.get("/healthz")
        done, took = threading.Event(), {}

        def calculate() -> None:
            t0 = time.perf_counter()
            r = client.post("/api/v1/calculators/parallel-split", json=body)
            took.update(wall=time.perf_counter() - t0, status=r.status_code, size=len(r.content))
            done.set()

        threading.Thread(target=calculate).start()
        lat = []
        while not done.is_set():
            t0 = time.perf_counter()
            assert client.get("/healthz").status_code == 200
            lat.append(time.perf_counter() - t0)
            time.sleep(0.02)
    print(f"calculation: {took['status']}, {took['wall']:.2f} s wall, {took['size'] / 1e6:.1f} MB answer; "
          f"/healthz answered {len(lat)} times meanwhile: median {statistics.median(lat) * 1e3:.1f} ms, "
          f"worst {max(lat) * 1e3:.1f} ms")


def main() -> None:
    if "--healthz" in sys.argv:
        healthz_beside_a_long_calculation()
        return
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    lookup = catalog_lookup(default_catalog())
    print(f"{'calculator':26} {'evaluations':>11} {'cpu s':>7} {'µs/eval':>8} {'peak B/eval':>11} "
          f"{'answer B/eval':>13} {'allowed evals':>13}  binding")
    rows = []
    for name, calc in REGISTRY.items():
        _, body = sweep_body(calc, n, lookup)
        body = special(name, calc, n) or body
        if body is None:
            body = copy.deepcopy(calc.example)
        figures = []
        try:   # the plain sweep and the sweep with every variant: a variant may answer fewer outputs per point
            for b in dict.fromkeys(map(orjson.dumps, (body, widest(calc, body)))):
                b = orjson.loads(b)
                cost = limits.cost_of(calc, calc.request_model.model_validate(b))
                e = max(cost.evaluations, 1)
                figures.append((e, *(v / e for v in measure(name, b, lookup))))
        except (RunError, CalcInputError, ValueError) as exc:
            print(f"{name:26} refused: {str(exc)[:90]}")
            continue
        e = max(f[0] for f in figures)
        p = limits.Profile(*(max(f[i] for f in figures) for i in (1, 2, 3)))
        cpu = p.cpu_s * e
        allowed = {"evaluations": limits.EVALUATIONS, "cpu": limits.CPU_S / max(p.cpu_s, 1e-12),
                   "memory": limits.MEMORY_BYTES / max(p.memory_bytes, 1e-12),
                   "answer": limits.ANSWER_BYTES / max(p.answer_bytes, 1e-12)}
        binding = min(allowed, key=allowed.get)
        rows.append((name, e, p))
        print(f"{name:26} {e:11,} {cpu:7.3f} {p.cpu_s * 1e6:8.2f} {p.memory_bytes:11.0f} {p.answer_bytes:13.1f} "
              f"{allowed[binding]:13,.0f}  {binding}")
    big = [r for r in rows if r[1] >= 1000]
    if big:
        worst = max(big, key=lambda r: r[2].cpu_s)
        print(f"\nslowest per evaluation (of sweeps ≥ 1,000 evaluations): {worst[0]} at {worst[2].cpu_s * 1e6:.2f} µs")
    print("\nmeasured profiles × 1.25 (for the `profile=` of each Calculator entry; sweeps of ≥ 1,000 evaluations):")
    for name, _, p in big:
        print(f'    "{name}": Profile({p.cpu_s * 1.25:.2g}, {p.memory_bytes * 1.25:.0f}, {p.answer_bytes * 1.25:.0f}),')


if __name__ == "__main__":
    main()

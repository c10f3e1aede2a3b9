"""Benchmark every calculator: one request through the ASGI app, and a 100,000-point sweep.

Prints, per calculator: median time of one request through the app (TestClient, in-process),
time per point of a 100,000-point sweep through the calculator, the same points computed by a
plain Python loop of scalar calls (on a sample, per point), and the speed-up. Then the 10,000-
configuration comparison (Qwen3-8B on H100 SXM: batch × context × KV bits) of NumPy against a
plain-Python loop of the same formulas, and a 100,000-point kv-cache sweep answered over HTTP.

Run: `.venv/bin/python benchmarks/bench_calculators.py` (figures vary with machine load). The same 10,000-configuration
grid answered by the roofline calculator, in-process and over HTTP, beside the peers' per-configuration loops:
`benchmarks/bench_grid.py`.
"""
from __future__ import annotations

import copy
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import logging  # noqa: E402

import numpy as np  # noqa: E402

from calculators.framework.registry import REGISTRY  # noqa: E402

SWEEP = 100_000
LOOP_SAMPLE = 300


def timeit(fn, repeat: int = 7, number: int = 1) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def _sweep_of(calc, field: str, n: int):
    """The example with `field` swept over n valid values and the other swept fields at one point.

    A scalar becomes n values around it; a list in the example is tiled to n points. None when the
    field is not a plain number or list of numbers."""
    body = copy.deepcopy(calc.example)
    for other in calc.sweepable:
        if other != field and isinstance(body.get(other), list) and body[other]:
            body[other] = body[other][0]
    value = body.get(field)
    if isinstance(value, list) and value and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        body[field] = [value[i % len(value)] for i in range(n)]
        return body
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    if isinstance(value, int):
        pts = (np.arange(n) % max(value, 1) + 1).tolist() if value > 1 else [value] * n
    elif 0 <= value <= 1:
        pts = (np.full(n, value) * np.linspace(0.5, 1.0, n)).tolist()
    else:
        pts = (value * np.linspace(0.5, 2.0, n)).tolist()
    body[field] = pts
    return body


def sweep_body(calc, n: int, lookup):
    """The first sweepable field whose sweep the calculator accepts (checked on 10 points first)."""
    from calculators.framework import CalcInputError

    for field in calc.sweepable:
        small = _sweep_of(calc, field, 10)
        if small is None:
            continue
        try:
            calc.compute(calc.request_model.model_validate(small), lookup)
        except (CalcInputError, ValueError):
            continue
        return field, _sweep_of(calc, field, n)
    return None, None


def main() -> None:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.settings import Settings
    from calculators.framework import CalcInputError
    from knowledge.build import build
    from knowledge.store import Store

    tmp = Path(tempfile.mkdtemp())
    db = tmp / "bench.duckdb"
    t0 = time.perf_counter()
    build(db)
    print(f"store built in {time.perf_counter() - t0:.2f} s")
    store = Store(db)
    app = create_app(Settings(db_path=db, build_if_stale=False))

    print(f"\n{'calculator':24} {'request (ms)':>12} {'sweep field':>24} {'sweep/pt (µs)':>14} {'loop/pt (µs)':>13} {'speed-up':>9}")
    with TestClient(app) as client:
        for name, calc in REGISTRY.items():
            url = f"/api/v1/calculators/{name}"
            assert client.post(url, json=calc.example).status_code == 200, name
            one = timeit(lambda: client.post(url, json=calc.example), repeat=5, number=20)
            field, body = sweep_body(calc, SWEEP, store.lookup)
            if field is None:
                print(f"{name:24} {one * 1e3:12.3f} {'(no sweepable field)':>24}")
                continue
            try:
                req = calc.request_model.model_validate(body)
            except Exception as exc:  # noqa: BLE001 - report, keep benchmarking the others
                print(f"{name:24} {one * 1e3:12.3f} {field:>24} sweep body invalid: {str(exc)[:60]}")
                continue
            try:
                sweep = timeit(lambda: calc.compute(req, store.lookup), repeat=3)
            except CalcInputError as exc:
                print(f"{name:24} {one * 1e3:12.3f} {field:>24} 100,000-point sweep refused: {exc.message[:60]}")
                continue
            sample = body[field][:LOOP_SAMPLE]
            scalars = []
            for v in sample:
                b = copy.deepcopy(body)
                b[field] = v
                scalars.append(calc.request_model.model_validate(b))
            loop = timeit(lambda: [calc.compute(r, store.lookup) for r in scalars], repeat=3) / len(scalars)
            print(f"{name:24} {one * 1e3:12.3f} {field:>24} {sweep / SWEEP * 1e6:14.3f} {loop * 1e6:13.1f} {loop / (sweep / SWEEP):8.0f}×")

        # A 100,000-point kv-cache sweep over HTTP (in-process ASGI; JSON both ways).
        if "kv-cache" in REGISTRY:
            body = {"model": "qwen3-8b", "tokens": list(range(1, SWEEP + 1))}
            http = timeit(lambda: client.post("/api/v1/calculators/kv-cache", json=body), repeat=3)
            req = REGISTRY["kv-cache"].request_model.model_validate(body)
            compute = timeit(lambda: REGISTRY["kv-cache"].compute(req, store.lookup), repeat=5)
            print(f"\nkv-cache 100,000-point sweep: {http * 1e3:.1f} ms over HTTP (ASGI, JSON in and out), "
                  f"{compute * 1e3:.2f} ms of it in the calculator")

    ten_thousand(store)


def ten_thousand(store) -> None:
    """10,000 configurations: KV bytes and a weights-only decode time bound, NumPy vs plain Python."""
    model = store.get("model", "qwen3-8b")
    hw = store.get("hardware", "h100-sxm")
    if not model or not hw:
        print("10,000-configuration comparison skipped: qwen3-8b or h100-sxm missing")
        return
    layers = model["layers"]["value"]; kv_heads = model["kv_heads"]["value"]; head_dim = model["head_dim"]["value"]
    params = model["params_total"]["value"]; bw = hw["memory_bandwidth_bytes_per_s"]["value"]
    batches = np.arange(1, 26)                      # 25
    contexts = np.linspace(1024, 131072, 25)        # 25
    kv_bits = np.array([16, 8, 6, 4.5, 4, 3, 2.5, 2, 1.58, 1.0, 12, 10, 5, 7, 3.5, 2.25])  # 16
    n = batches.size * contexts.size * kv_bits.size

    def vectorised():
        b, c, k = np.meshgrid(batches, contexts, kv_bits, indexing="ij")
        kv = 2 * layers * kv_heads * head_dim * (k / 8) * c * b
        t = (params * 2 + kv) / bw
        return kv, t

    def plain():
        kv_out, t_out = [], []
        for b in batches.tolist():
            for c in contexts.tolist():
                for k in kv_bits.tolist():
                    kv = 2 * layers * kv_heads * head_dim * (k / 8) * c * b
                    kv_out.append(kv)
                    t_out.append((params * 2 + kv) / bw)
        return kv_out, t_out

    kv_np, t_np = vectorised()
    kv_py, t_py = plain()
    assert np.allclose(kv_np.ravel(), kv_py) and np.allclose(t_np.ravel(), t_py)
    tv = timeit(vectorised, repeat=7)
    tp = timeit(plain, repeat=5)
    print(f"\n{n:,} configurations (Qwen3-8B on H100 SXM, batch × context × KV bits; KV bytes + weights-only "
          f"decode bound): NumPy {tv * 1e3:.3f} ms, plain Python {tp * 1e3:.2f} ms, ratio {tp / tv:.0f}×")


if __name__ == "__main__":
    os.environ.setdefault("CASEBOOK_BUILD", "0")
    logging.disable(logging.INFO)
    main()

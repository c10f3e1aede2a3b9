"""One 10,000-configuration decode grid, timed side by side: the peers' per-configuration loops and the Casebook.

The grid: a decode step of Qwen3-8B on one H100 SXM, batch (25: 1 … 25) × context (100: 1,024 … 131,072 tokens)
× KV-cache bits (4: 16, 8, 4, 2) = 10,000 configurations. The Casebook answers it with its roofline calculator in
two forms: as one grid request (`grid: true`: the 25 batches, 100 contexts and 4 KV formats as axes, every
combination in the answer) and as 4 paired sweeps of 2,500 points (one per KV format, batch and context listed
point by point). The two answers hold the same numbers (checked before timing).

Printed, in one run:
- the peers installable from the registry (the `bench` extra: `.venv/bin/pip install -e '.[bench]'`), each in its
  own per-configuration loop: llm-analysis 0.2.2 (`LLMAnalysis.inference`) and genz-llm 0.0.16
  (`decode_moddeling`); a peer that is missing or cannot answer the grid says why. A slow peer is timed on an
  evenly spread sample of the grid and its time for all 10,000 extrapolated (the output says so);
- the Casebook in-process, for each form: compute only (requests validated beforehand), with request
  validation, and the whole answer (validation, envelope, JSON encoding); the same bound in bare NumPy for scale;
- the Casebook over HTTP (a uvicorn server on 127.0.0.1 started by this script): the grid as one grid request, as
  4 requests, and as one `calculators:batch` request of the 4; one single-point request; and a 100,000-point
  kv-cache sweep against one kv-cache call;
- the goals of issue #14 beside the figures.

Every Casebook figure is the median and the minimum of several repeats. The machine is shared and noisy: read the
minimum as what the code costs and the median as what it cost this time.

Run: `.venv/bin/python benchmarks/bench_grid.py [--repeat 9] [--llm-analysis-configs 10000] [--genz-configs 12]
[--profile]` (the peers' imports alone take ~20 s; genz-llm needs ~0.5 s per configuration).
"""
from __future__ import annotations

import argparse
import contextlib
import io
import logging
import os
import socket
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

BATCHES = np.arange(1, 26)                                     # 25
CONTEXTS = np.linspace(1024, 131072, 100).round().astype(int)  # 100
KV_BITS = (16, 8, 4, 2)                                        # 4
N_CONFIGS = BATCHES.size * CONTEXTS.size * len(KV_BITS)
MODEL, HARDWARE = "qwen3-8b", "h100-sxm"
#: Qwen3-8B's shapes (its config.json), for the peers that take shapes instead of an id
QWEN3_8B = {"layers": 36, "heads": 32, "kv_heads": 8, "head_dim": 128, "hidden": 4096, "ffn": 12288, "vocab": 151936,
            "max_context": 131072}
KV_SWEEP_POINTS = 100_000
GOAL_IN_PROCESS_S = 1e-3
GOAL_PEER_RATIO = 1000
GOAL_HTTP_GRID_S = 15e-3
GOAL_KV_SWEEP_RATIO = 40


# --------------------------------------------------------------------------- the grid

def grid() -> list[tuple[int, int, int]]:
    """The 10,000 configurations as (batch, context tokens, KV bits), KV bits outermost (one sweep each)."""
    return [(int(b), int(c), k) for k in KV_BITS for b in BATCHES for c in CONTEXTS]


def casebook_bodies() -> list[dict]:
    """The grid as 4 roofline requests: one per KV width, batch × context swept point by point (2,500 points)."""
    b, c = np.meshgrid(BATCHES, CONTEXTS, indexing="ij")
    return [{"model": MODEL, "hardware": HARDWARE, "phase": "decode", "batch": b.ravel().tolist(),
             "context_tokens": c.ravel().tolist(), "kv_format": {"name": f"kv{k}", "bits_per_value": k},
             "estimate": "bound"} for k in KV_BITS]


def casebook_grid_body() -> dict:
    """The grid as one roofline request: batch, context and the KV formats as the axes of a grid."""
    return {"model": MODEL, "hardware": HARDWARE, "phase": "decode", "batch": BATCHES.tolist(),
            "context_tokens": CONTEXTS.tolist(), "kv_format": [{"name": f"kv{k}", "bits_per_value": k} for k in KV_BITS],
            "estimate": "bound", "grid": True}


def spread_sample(configs: list, n: int) -> list:
    """`n` configurations evenly spread over the grid (all of them when n ≥ its size)."""
    if n >= len(configs):
        return list(configs)
    idx = np.linspace(0, len(configs) - 1, max(n, 1)).round().astype(int)
    return [configs[i] for i in idx]


# --------------------------------------------------------------------------- timing

def repeat_times(fn: Callable[[], Any], repeat: int, setup: Callable[[], Any] | None = None) -> list[float]:
    """Wall times of `repeat` calls of `fn` (with `setup()`'s value as its argument when given, made untimed)."""
    times = []
    for _ in range(repeat):
        arg = setup() if setup else None
        t0 = time.perf_counter()
        fn(arg) if setup else fn()
        times.append(time.perf_counter() - t0)
    return times


def ms(seconds: float) -> str:
    """A duration in milliseconds with 3 significant figures."""
    v = seconds * 1e3
    return f"{v:,.3g} ms" if v < 100 else f"{v:,.0f} ms"


def med_min(times: list[float]) -> str:
    """'median X ms, min Y ms' of a list of times."""
    return f"median {ms(statistics.median(times)):>10}, min {ms(min(times)):>10}"


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


# --------------------------------------------------------------------------- peers

def peer_llm_analysis(configs: list[tuple[int, int, int]], sample: int) -> dict:
    """llm-analysis 0.2.2: one `LLMAnalysis.inference` per configuration (one decode token after `context` prompt
    tokens, KV bytes from the KV bits), on the H100 SXM 80 GB config it ships."""
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from llm_analysis.analysis import LLMAnalysis
            from llm_analysis.config import ModelConfig, get_dtype_config_by_name, get_gpu_config_by_name
            from llm_analysis.logger import logger
    except Exception as exc:  # noqa: BLE001 - report why the peer is absent, never fake it
        return {"error": f"not importable ({type(exc).__name__}: {exc}); install the bench extra"}
    logger.setLevel(logging.ERROR)
    q = QWEN3_8B
    model = ModelConfig(name="qwen3-8b", num_layers=q["layers"], n_head=q["heads"], hidden_dim=q["hidden"],
                        vocab_size=q["vocab"], max_seq_len=q["max_context"], num_key_value_heads=q["kv_heads"],
                        ffn_embed_dim=q["ffn"], model_type="qwen3")
    analysis = LLMAnalysis(model, get_gpu_config_by_name("h100-sxm-80gb"), get_dtype_config_by_name("w16a16e16"))
    chosen = spread_sample(configs, sample)
    raised, first = 0, None
    t0 = time.perf_counter()
    for b, c, k in chosen:
        try:
            r = analysis.inference(batch_size_per_gpu=b, seq_len=c, num_tokens_to_generate=1, kv_cache_dtype_bytes=k / 8)
            if first is None and (b, c, k) == chosen[0]:
                first = r["decode_latency"]
        except (AssertionError, ValueError, ZeroDivisionError):
            raised += 1
    elapsed = time.perf_counter() - t0
    return {"measured": len(chosen), "elapsed": elapsed, "raised": raised, "first_decode_s": first}


def peer_genz(configs: list[tuple[int, int, int]], sample: int) -> dict:
    """genz-llm 0.0.16: one `decode_moddeling` per configuration, BF16 weights and the KV cache quantised to the KV
    bits through its `gear_params` (no sparse or low-rank part), on an H100 SXM (989 TFLOP/s, 3.35 TB/s, 80 GiB)."""
    kv_names = {16: "bf16", 8: "int8", 4: "int4", 2: "int2"}
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            from GenZ.LLM_inference.llm_decode import decode_moddeling
            from GenZ.Models.default_models import ModelConfig
            from GenZ.system import System
            from GenZ.unit import Unit
    except Exception as exc:  # noqa: BLE001
        return {"error": f"not importable ({type(exc).__name__}: {exc}); install the bench extra"}
    q = QWEN3_8B
    model = ModelConfig(model="Qwen/Qwen3-8B", vocab_size=q["vocab"], hidden_size=q["hidden"],
                        intermediate_size=q["ffn"], num_decoder_layers=q["layers"], num_attention_heads=q["heads"],
                        num_key_value_heads=q["kv_heads"], head_dim=q["head_dim"], max_model_len=q["max_context"])
    systems = {k: System(Unit(), frequency=1000, flops=989, off_chip_mem_size=80 * 1024, offchip_mem_bw=3350,
                         bits="bf16", external_mem_bw=0, interchip_link_bw=450, interchip_link_latency=1,
                         gear_params={"r": 0, "s": 0, "b": kv_names[k]}) for k in KV_BITS}
    chosen = spread_sample(configs, sample)
    raised, first = 0, None
    t0 = time.perf_counter()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        for b, c, k in chosen:
            try:
                r = decode_moddeling(model=model, batch_size=b, input_tokens=c, output_tokens=1, Bb=1,
                                     system_name=systems[k], bits="bf16")
                if first is None and (b, c, k) == chosen[0]:
                    first = r["Latency"] / 1e3
            except (AssertionError, ValueError, ZeroDivisionError):
                raised += 1
    elapsed = time.perf_counter() - t0
    return {"measured": len(chosen), "elapsed": elapsed, "raised": raised, "first_decode_s": first}


def print_peer(name: str, result: dict) -> float | None:
    """One line per peer; its time for the whole grid (extrapolated from a sample when it was one), or None."""
    if "error" in result:
        print(f"  {name:34} could not run: {result['error']}")
        return None
    n, elapsed = result["measured"], result["elapsed"]
    whole = elapsed / n * N_CONFIGS
    how = "the whole grid" if n == N_CONFIGS else f"{n:,} configurations spread over the grid, × {N_CONFIGS / n:,.0f}"
    print(f"  {name:34} {whole:10.2f} s for 10,000 ({elapsed / n * 1e3:.3g} ms per configuration; measured on {how}); "
          f"{result['raised'] / n:.0%} of configurations raise (do not fit in memory or exceed the context)")
    return whole


# --------------------------------------------------------------------------- Casebook in-process

def bench_in_process(repeat: int, profile: bool) -> dict:
    """The grid in-process: compute only, with validation, and the whole answer (envelope and JSON)."""
    import orjson

    from api.responses import dumps
    from api import envelope
    from calculators.framework import runner
    from calculators.framework.registry import REGISTRY
    from knowledge.build import ensure_built
    from knowledge.store import Store

    db = Path(os.environ.get("CASEBOOK_DB", ROOT / "var" / "casebook.duckdb"))
    ensure_built(db)                                               # a fresh clone has no store yet: build it as serve does
    store = Store(db)
    lookup = store.lookup
    calc = REGISTRY["roofline"]
    bodies = casebook_bodies()
    envelope.run("roofline", bodies[0], lookup)                      # warm caches (store records, measured tables)

    def fresh() -> list:
        return [calc.request_model.model_validate(b) for b in bodies]

    def compute_only(reqs: list) -> list:
        return [calc.compute(r, lookup) for r in reqs]

    def validated() -> list:
        return [runner.compute("roofline", b, lookup) for b in bodies]

    def whole() -> bytes:
        return dumps({"results": [{"status": 200, "response": envelope.run("roofline", b, lookup)} for b in bodies]})

    grid_body = casebook_grid_body()

    def grid_fresh() -> Any:
        return calc.request_model.model_validate(grid_body)

    def grid_compute(req: Any) -> Any:
        return calc.compute(req, lookup)

    def grid_validated() -> Any:
        return runner.compute("roofline", grid_body, lookup)

    def grid_whole() -> bytes:
        return dumps(envelope.run("roofline", grid_body, lookup))

    results = compute_only(fresh())
    points = sum(np.size(r.outputs["time_s"]) for r in results)
    assert points == N_CONFIGS, points
    # the grid's answer holds the same numbers as the 4 sweeps (its last axis is the KV format)
    grid_answer = orjson.loads(grid_whole())["outputs"]
    assert grid_answer["grid_shape"] == [BATCHES.size, CONTEXTS.size, len(KV_BITS)]
    for k, r in enumerate(results):
        assert np.array_equal(np.asarray(grid_answer["time_s"])[:, :, k].ravel(), r.outputs["time_s"])
    t_compute = repeat_times(compute_only, repeat, setup=fresh)
    t_validated = repeat_times(validated, repeat)
    t_whole = repeat_times(whole, repeat)
    kb = len(whole()) / 1e3
    t_grid_compute = repeat_times(grid_compute, repeat, setup=grid_fresh)
    t_grid_validated = repeat_times(grid_validated, repeat)
    t_grid_whole = repeat_times(grid_whole, repeat)
    grid_kb = len(grid_whole()) / 1e3

    # the same bound in bare NumPy (weights + KV read once per step over the bandwidth), for scale
    model, hw = store.get("model", MODEL), store.get("hardware", HARDWARE)
    kv_per_token_value = 2 * model["layers"]["value"] * model["kv_heads"]["value"] * model["head_dim"]["value"]
    weights = model["params_total"]["value"] * 2
    bw = hw["memory_bandwidth_bytes_per_s"]["value"]

    def bare() -> np.ndarray:
        b, c, k = np.meshgrid(BATCHES, CONTEXTS, np.asarray(KV_BITS, dtype=float), indexing="ij")
        return (weights + kv_per_token_value * (k / 8) * c * b) / bw

    t_bare = repeat_times(bare, repeat)
    if profile:
        import cProfile
        import pstats
        reqs = fresh()
        prof = cProfile.Profile()
        prof.enable()
        compute_only(reqs)
        whole()
        grid_compute(grid_fresh())
        grid_whole()
        prof.disable()
        print("\ncProfile of the in-process path (compute of the 4 sweeps, the whole answer, then the same for the grid "
              "request), top 25 by own time:")
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(25)
    first = results[0]
    return {"compute": t_compute, "validated": t_validated, "whole": t_whole, "bare": t_bare, "kb": kb,
            "grid_compute": t_grid_compute, "grid_validated": t_grid_validated, "grid_whole": t_grid_whole,
            "grid_kb": grid_kb,
            "first_decode_s": float(np.asarray(first.outputs["time_s"]).reshape(-1)[0])}


# --------------------------------------------------------------------------- Casebook over HTTP

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server() -> Any:
    """A uvicorn server of the app on 127.0.0.1 (one worker, the built store, no rebuild), stopped on exit."""
    port = free_port()
    env = dict(os.environ, CASEBOOK_BUILD="0")
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning", "--no-access-log"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        import httpx
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                err = proc.stderr.read().decode(errors="replace")[-2000:] if proc.stderr else ""
                raise RuntimeError(f"the server did not start: {err}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bench_http(repeat: int) -> dict:
    """The grid over HTTP (4 requests; one batch request), one single-point request, and the kv-cache sweep."""
    import httpx
    import orjson

    bodies = [orjson.dumps(b) for b in casebook_bodies()]
    grid_req = orjson.dumps(casebook_grid_body())
    batch = orjson.dumps({"requests": [{"calculator": "roofline", "request": orjson.loads(b)} for b in bodies]})
    single = orjson.dumps({"model": MODEL, "hardware": HARDWARE, "phase": "decode", "batch": 8,
                           "context_tokens": 4096, "estimate": "bound"})
    kv_one = orjson.dumps({"model": MODEL, "tokens": 8192})
    kv_sweep = orjson.dumps({"model": MODEL, "tokens": list(range(1, KV_SWEEP_POINTS + 1))})
    headers = {"content-type": "application/json"}
    with server() as base, httpx.Client(base_url=base, headers=headers, timeout=120) as client:
        def post(path: str, content: bytes) -> Any:
            r = client.post(path, content=content)
            if r.status_code != 200:
                raise RuntimeError(f"POST {path}: {r.status_code} {r.text[:300]}")
            return orjson.loads(r.content)

        def send(path: str, content: bytes) -> int:
            """One request, its answer read in full (not parsed): the bytes received."""
            return len(client.post(path, content=content).content)

        answers = [post("/api/v1/calculators/roofline", b) for b in bodies]      # checked once, then timed
        assert sum(len(a["outputs"]["time_s"]) for a in answers) == N_CONFIGS
        assert np.size(post("/api/v1/calculators/roofline", grid_req)["outputs"]["time_s"]) == N_CONFIGS
        assert all(item["status"] == 200 for item in post("/api/v1/calculators:batch", batch)["results"])
        assert len(post("/api/v1/calculators/kv-cache", kv_sweep)["outputs"]["bytes_total"]) == KV_SWEEP_POINTS
        post("/api/v1/calculators/roofline", single)
        post("/api/v1/calculators/kv-cache", kv_one)
        t_grid = repeat_times(lambda: send("/api/v1/calculators/roofline", grid_req), repeat)
        t_four = repeat_times(lambda: [send("/api/v1/calculators/roofline", b) for b in bodies], repeat)
        t_batch = repeat_times(lambda: send("/api/v1/calculators:batch", batch), repeat)
        t_single = repeat_times(lambda: send("/api/v1/calculators/roofline", single), repeat * 5)
        t_kv_one = repeat_times(lambda: send("/api/v1/calculators/kv-cache", kv_one), repeat * 5)
        t_kv_sweep = repeat_times(lambda: send("/api/v1/calculators/kv-cache", kv_sweep), repeat)
        batch_answer = client.post("/api/v1/calculators:batch", content=batch).content
        t_parse = repeat_times(lambda: orjson.loads(batch_answer), repeat)
        kv_kb = send("/api/v1/calculators/kv-cache", kv_sweep) / 1e3
        grid_kb = send("/api/v1/calculators/roofline", grid_req) / 1e3
    return {"grid": t_grid, "grid_kb": grid_kb, "four": t_four, "batch": t_batch, "single": t_single, "kv_one": t_kv_one, "kv_sweep": t_kv_sweep,
            "batch_kb": len(batch_answer) / 1e3, "kv_kb": kv_kb, "parse": t_parse}


# --------------------------------------------------------------------------- main

def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=9, help="repeats of every Casebook figure (median and min printed)")
    ap.add_argument("--llm-analysis-configs", type=int, default=N_CONFIGS,
                    help="configurations llm-analysis is timed on (default: the whole grid)")
    ap.add_argument("--genz-configs", type=int, default=12,
                    help="configurations genz-llm is timed on, spread over the grid (it needs ~0.5 s each)")
    ap.add_argument("--profile", action="store_true", help="print cProfile's top entries of the in-process path")
    ap.add_argument("--no-http", action="store_true", help="skip the HTTP figures")
    args = ap.parse_args()
    logging.disable(logging.INFO)

    print(f"Grid: {MODEL} decode step on {HARDWARE}, batch {BATCHES[0]}–{BATCHES[-1]} ({BATCHES.size}) × context "
          f"{CONTEXTS[0]:,}–{CONTEXTS[-1]:,} tokens ({CONTEXTS.size}) × KV bits {'/'.join(map(str, KV_BITS))} "
          f"({len(KV_BITS)}) = {N_CONFIGS:,} configurations.")
    print("The machine is shared with other jobs and noisy: the minimum is what the code costs, the median what it "
          "cost this time.\n")

    configs = grid()
    print("Peers, one call per configuration (installed by the `bench` extra):")
    peers = {"llm-analysis 0.2.2 (inference)": peer_llm_analysis(configs, args.llm_analysis_configs),
             "genz-llm 0.0.16 (decode_moddeling)": peer_genz(configs, args.genz_configs)}
    peer_times = [t for t in (print_peer(name, r) for name, r in peers.items()) if t is not None]

    print(f"\nCasebook in-process (roofline), {args.repeat} repeats:")
    ip = bench_in_process(args.repeat, args.profile)
    print("  the grid as one grid request (grid: true; 25 × 100 × 4 axes):")
    print(f"    compute only (request validated beforehand)  {med_min(ip['grid_compute'])}")
    print(f"    with request validation                      {med_min(ip['grid_validated'])}")
    print(f"    whole answer (validation, envelope, JSON)    {med_min(ip['grid_whole'])}  ({ip['grid_kb']:,.0f} kB of JSON)")
    print("  the grid as 4 paired sweeps of 2,500 points (one per KV format):")
    print(f"    compute only (requests validated beforehand) {med_min(ip['compute'])}")
    print(f"    with request validation                      {med_min(ip['validated'])}")
    print(f"    whole answer (validation, envelope, JSON)    {med_min(ip['whole'])}  ({ip['kb']:,.0f} kB of JSON)")
    print(f"  the same bound in bare NumPy, for scale        {med_min(ip['bare'])}")

    best = min(ip["grid_compute"])
    print("\nGoals (issue #14), judged on the grid request (the 4 sweeps: see above):")
    print(f"  in-process grid ≤ {ms(GOAL_IN_PROCESS_S)}: compute only min {ms(best)} (with validation "
          f"{ms(min(ip['grid_validated']))}) — {verdict(best <= GOAL_IN_PROCESS_S)}")
    if peer_times:
        fastest = min(peer_times)
        print(f"  ≥ {GOAL_PEER_RATIO:,}× the fastest peer loop ({fastest:.2f} s): {fastest / best:,.0f}× (compute only, "
              f"min), {fastest / min(ip['grid_validated']):,.0f}× with validation, "
              f"{fastest / min(ip['grid_whole']):,.0f}× whole answer; 4 sweeps: {fastest / min(ip['compute']):,.0f}× "
              f"compute only — {verdict(fastest / best >= GOAL_PEER_RATIO)}")
    else:
        print("  ≥ 1,000× the fastest peer loop: no peer could run (see above)")

    if not args.no_http:
        print(f"\nCasebook over HTTP (uvicorn, one worker, 127.0.0.1; request sent, answer received in full), "
              f"{args.repeat} repeats:")
        h = bench_http(args.repeat)
        print(f"  grid as one grid request (grid: true)          {med_min(h['grid'])}  ({h['grid_kb']:,.0f} kB answer)")
        print(f"  grid as 4 requests (one per KV width)          {med_min(h['four'])}")
        print(f"  grid as one calculators:batch request          {med_min(h['batch'])}  ({h['batch_kb']:,.0f} kB answer)")
        print(f"  one single-point roofline request              {med_min(h['single'])}")
        print(f"  one kv-cache call                              {med_min(h['kv_one'])}")
        print(f"  100,000-point kv-cache sweep                   {med_min(h['kv_sweep'])}  ({h['kv_kb']:,.0f} kB answer)")
        print(f"  (a client parsing the grid's batch answer with orjson: {med_min(h['parse'])}, not counted above)")
        grid_best = min(min(h["grid"]), min(h["four"]), min(h["batch"]))
        ratio = min(h["kv_sweep"]) / min(h["kv_one"])
        print(f"  goal: grid over HTTP ≤ {ms(GOAL_HTTP_GRID_S)}: min {ms(grid_best)} — "
              f"{verdict(grid_best <= GOAL_HTTP_GRID_S)}")
        print(f"  goal: 100,000-point sweep within {GOAL_KV_SWEEP_RATIO}× one call: {ratio:.1f}× (min over min) — "
              f"{verdict(ratio <= GOAL_KV_SWEEP_RATIO)}")

    print(f"\nFor orientation (not a validation), the decode step at batch {BATCHES[0]}, context {CONTEXTS[0]:,}, "
          f"KV {KV_BITS[0]} bit: Casebook roofline bound {ms(ip['first_decode_s'])}", end="")
    for name, r in peers.items():
        if r.get("first_decode_s") is not None:
            print(f", {name.split(' (')[0]} {ms(r['first_decode_s'])}", end="")
    print("; each tool has its own model (hardware figures, what it counts).")


if __name__ == "__main__":
    os.environ.setdefault("CASEBOOK_BUILD", "0")
    main()

"""Work bounded by the model, not only by the request size (issue 27, item 1).

The audit's findings, each reproduced: a 706-byte kv-cache request whose `model_config` has 10^9 layers took a worker
to ~6.7 GB (now a 422 naming `model_config.num_hidden_layers` and its bound, with nothing allocated); 10^6 experts
likewise; a batch of 1,000 speculative-decoding items at the per-request draw cap (20 M draws each) ran 282 s of CPU
(now a 413 from the cost model, before any draw). Then the guard, the last line: a calculation past its CPU budget
stops with a 503 problem and the next request is answered; in a worker whose memory is capped, a calculation that
allocates past the cap is a 503 and the worker goes on.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from calculators.domain.hf_config import record_from_config
from calculators.domain.hf_reader import BOUNDS
from calculators.families.serving import speculative
from calculators.framework import CalcInputError, limits
from calculators.framework.registry import REGISTRY
from calculators.framework.runner import RunError, solve

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = "application/problem+json"


def where(exc: CalcInputError) -> str:
    return ".".join(map(str, exc.loc))


def llama(**over) -> dict:
    """A Llama-3.1-8B-shaped config.json, with some counts replaced."""
    return {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256,
            "torch_dtype": "bfloat16"} | over


def mixtral(**over) -> dict:
    return llama(model_type="mixtral", num_local_experts=8, num_experts_per_tok=2) | over


def test_the_audit_request_a_billion_layers_is_a_422_naming_the_field_without_allocating(client):
    body = {"model_config": llama(num_hidden_layers=10**9), "tokens": 8192}
    assert len(json.dumps(body)) < 706
    tracemalloc.start()
    try:
        r = client.post("/api/v1/calculators/kv-cache", json=body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.status_code == 422, r.text[:300]
    assert r.headers["content-type"].startswith(PROBLEM)
    err = r.json()["errors"][0]
    assert err["field"] == "model_config.num_hidden_layers"
    assert "1,000" in err["message"] and "1,000,000,000" in err["message"]
    assert peak < 32 * 2**20             # the old reader built a list entry per layer: gigabytes


def test_a_layer_count_written_as_1e9_is_a_422_too():
    with pytest.raises(RunError) as e:
        solve("kv-cache", {"model_config": llama(num_hidden_layers=1e9), "tokens": 8192})
    assert e.value.status == 422 and e.value.errors[0].field == "model_config.num_hidden_layers"


def test_a_million_experts_is_a_422_naming_the_experts_key():
    with pytest.raises(RunError) as e:
        solve("moe", {**{k: v for k, v in REGISTRY["moe"].example.items() if k != "model"},
                      "model_config": mixtral(num_local_experts=10**6)})
    assert e.value.status == 422
    err = e.value.errors[0]
    assert err.field == "model_config.num_local_experts" and "4,096" in err.message


@pytest.mark.parametrize("key,bound", [("num_hidden_layers", 1_000), ("num_attention_heads", 4_096),
                                       ("num_key_value_heads", 4_096), ("hidden_size", 262_144),
                                       ("vocab_size", 10**7), ("intermediate_size", 2**20)])
def test_each_bound_is_stated_and_the_bound_itself_is_accepted(key, bound):
    assert BOUNDS[key][0] == bound
    with pytest.raises(CalcInputError) as e:
        record_from_config(llama(**{key: bound + 1}))
    assert where(e.value) == f"model_config.{key}"
    assert f"{bound:,}" in e.value.message and f"{bound + 1:,}" in e.value.message
    if key not in ("num_attention_heads", "num_key_value_heads"):       # heads must also divide the hidden size
        record_from_config(llama(**{key: bound}))


def test_experts_in_a_text_config_are_bounded_too():
    config = {"model_type": "wrapper", "text_config": mixtral(num_local_experts=5_000)}
    with pytest.raises(CalcInputError) as e:
        record_from_config(config)
    assert where(e.value) == "model_config.text_config.num_local_experts" and "4,096" in e.value.message


def test_the_real_configs_stay_within_the_bounds():
    configs = sorted((ROOT / "knowledge" / "data" / "model-configs").glob("*_config.json"))
    assert len(configs) > 20
    read = 0
    for path in configs:
        try:
            record_from_config(json.loads(path.read_text()))
            read += 1
        except CalcInputError as exc:          # a layout the reader refuses, but never for a bound
            assert "the bound on" not in exc.message, (path.name, exc.message)
    assert read > 20


# --------------------------------------------------------------------------- priced before any work

def speculative_item(rounds: int = 500_000) -> dict:
    """10 points × `rounds` rounds × 4 drafts: 20 M draws at the default rounds (the per-request cap)."""
    return {"acceptance_rate": [0.5] * 10, "draft_tokens": 4, "simulate": {"rounds": rounds, "seed": 1}}


def test_the_draws_are_priced():
    calc = REGISTRY["speculative-decoding"]
    cost = limits.check(calc, calc.request_model.model_validate(speculative_item()))
    assert cost.as_dict()["work"] == {"random draws": 20_000_000}
    assert cost.cpu_s == pytest.approx(20e6 * speculative.DRAW_CPU_S, rel=0.01)
    assert limits.cost_of(calc, speculative_item()).cpu_s == cost.cpu_s        # the raw body: the same


def test_a_simulation_over_the_cpu_limit_is_refused_naming_its_rounds():
    calc = REGISTRY["speculative-decoding"]
    body = {"acceptance_rate": [0.5] * 1000, "draft_tokens": [32] * 1000, "simulate": {"rounds": 5000}}
    with pytest.raises(limits.LimitExceeded) as e:
        limits.check(calc, calc.request_model.model_validate(body))
    assert e.value.status == 413 and e.value.extensions["limit"]["name"] == "cpu_s"
    assert where(e.value) == "simulate.rounds"
    assert "160 M random draws" in e.value.message


def test_the_audit_batch_of_a_thousand_simulations_is_refused_before_any_draw(client, monkeypatch):
    drawn = []
    real = np.random.default_rng
    monkeypatch.setattr(speculative.np.random, "default_rng", lambda *a: drawn.append(a) or real(*a))
    body = {"requests": [{"calculator": "speculative-decoding", "request": speculative_item()}] * 1000}
    r = client.post("/api/v1/calculators:batch", json=body)
    assert r.status_code == 413, r.text[:300]
    assert r.headers["content-type"].startswith(PROBLEM)
    p = r.json()
    assert p["limit"]["name"] == "cpu_s" and p["cost"]["items"] == 1000
    assert p["cost"]["estimated_cpu_s"] >= 1000 * 20e6 * speculative.DRAW_CPU_S * 0.99
    assert drawn == []                                  # nothing simulated


def test_config_layers_are_priced_and_summed_across_a_batch():
    calc = REGISTRY["kv-cache"]
    body = {"model_config": llama(num_hidden_layers=1000), "tokens": 8192}
    cost = limits.check(calc, calc.request_model.model_validate(body))
    assert cost.as_dict()["work"] == {"model_config layers": 1000}
    with pytest.raises(limits.LimitExceeded) as e:
        limits.check_total([cost] * 1000)
    assert e.value.extensions["limit"]["name"] == "cpu_s"
    small = limits.check(calc, calc.request_model.model_validate({**body, "model_config": llama()}))
    limits.check_total([small] * 100)                   # a hundred real configs fit


def test_an_over_bound_config_is_not_refused_by_the_cost_model_first():
    """The layer count is priced up to the reader's bound: past it the answer is the reader's 422, not a 413."""
    calc = REGISTRY["kv-cache"]
    cost = limits.cost_of(calc, {"model_config": llama(num_hidden_layers=10**12), "tokens": 1})
    assert cost.work[0].units == limits.CONFIG_MAX_LAYERS


# --------------------------------------------------------------------------- the guard

def test_a_calculation_past_its_cpu_budget_stops_with_a_503_and_the_next_is_answered(client, monkeypatch):
    monkeypatch.setenv("CASEBOOK_LIMIT_GUARD_CPU_S", "0.001")
    r = client.post("/api/v1/calculators/speculative-decoding", json=speculative_item(200_000))
    assert r.status_code == 503, r.text[:300]
    assert r.headers["content-type"].startswith(PROBLEM)
    p = r.json()
    assert p["type"].endswith("overrun") and p["limit"]["env"] == "CASEBOOK_LIMIT_GUARD_CPU_S"
    assert p["spent_cpu_s"] >= 0.001          # at least the budget it ran past (the answer rounds to 1 ms)
    monkeypatch.delenv("CASEBOOK_LIMIT_GUARD_CPU_S")
    ok = client.post("/api/v1/calculators/speculative-decoding", json=speculative_item(200_000))
    assert ok.status_code == 200, ok.text[:300]


def test_the_items_of_a_batch_share_one_guard(client, monkeypatch):
    """Each item alone is under the budget; together they are past it: the batch answers the guard's 503."""
    calc = REGISTRY["speculative-decoding"]
    one = speculative_item(50_000)
    with limits.guard(cpu_s=1e9):
        start = limits.time.thread_time()
        solve("speculative-decoding", one)
        each = limits.time.thread_time() - start
    monkeypatch.setenv("CASEBOOK_LIMIT_GUARD_CPU_S", str(each * 3))
    assert limits.check(calc, calc.request_model.model_validate(one))
    r = client.post("/api/v1/calculators:batch", json={"requests": [{"calculator": calc.name, "request": one}] * 30})
    assert r.status_code == 503, r.text[:300]
    assert r.json()["type"].endswith("overrun")


def test_the_guard_is_off_outside_a_calculation_and_nested_guards_keep_the_outer_budget():
    limits.checkpoint()                                 # no guard: nothing to check
    with limits.guard(cpu_s=0.0):
        with limits.guard(cpu_s=1e9):                    # the inner one does not reset the budget
            with pytest.raises(limits.Overrun):
                sum(range(10_000))
                limits.checkpoint()
    limits.checkpoint()


MEMORY_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from calculators.framework import limits
from calculators.framework.runner import RunError, solve
cap = limits.cap_memory(256 * 2**20)
out = {"cap": cap}
def status(name, body):
    try:
        solve(name, body)
        return 200
    except RunError as e:
        return [e.status, e.kind]
# the audit's request, in a capped worker: refused before any allocation
out["layers"] = status("kv-cache", {"model_config": {"model_type": "llama", "num_hidden_layers": 10**9,
    "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
    "intermediate_size": 14336, "torch_dtype": "bfloat16"}, "tokens": 8192})
# an accepted request that allocates more than the cap: a 503, and the process goes on
import numpy as np
from calculators.families.serving import speculative
real = np.random.default_rng
class Greedy:
    def __init__(self, rng): self.rng = rng
    def random(self, shape): return np.zeros((512, 2**20))      # 4 GiB, past the cap
speculative.np.random.default_rng = lambda *a: Greedy(real(*a))
out["greedy"] = status("speculative-decoding", {"acceptance_rate": 0.5, "simulate": {"rounds": 10}})
speculative.np.random.default_rng = real
out["after"] = status("speculative-decoding", {"acceptance_rate": 0.5, "simulate": {"rounds": 1000}})
print(json.dumps(out))
"""


def test_in_a_capped_worker_an_allocation_past_the_cap_is_a_503_and_the_worker_lives():
    p = subprocess.run([sys.executable, "-c", MEMORY_CHILD, str(ROOT)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["cap"] is not None
    assert out["layers"] == [422, "validation"]
    assert out["greedy"] == [503, "out-of-memory"]
    assert out["after"] == 200

"""Every answer opens with a one-sentence headline computed from the result (issue 13, part 4).

- every calculator's example (and extra examples) gives a sentence naming no Python value;
- a sweep on each calculator's first sweepable field gives a headline too (and, for the families here, says how many
  points it describes);
- per headline family, the numbers in the headline are the outputs' numbers, rounded;
- the shared formatting helpers label decimal and binary units apart and never raise.
"""
from __future__ import annotations

import copy
import math
import re

import pytest

from calculators.framework import headline as hf
from calculators.framework.registry import REGISTRY
from api.envelope import run
from calculators.framework.runner import RunError

#: Families whose headlines are written in the modules of this change (the rest are written elsewhere).
OWN_MODULES = {"break_even", "checkpoint", "collective", "kv_eviction", "moe", "overlap", "prefix_cache", "quantization",
               "queueing", "rl_pipeline", "roofline", "serving_cost", "speculative", "tp_overhead", "training_compute",
               "weight_memory"}
OWN = sorted(n for n, c in REGISTRY.items() if c.compute.__module__.rsplit(".", 1)[-1] in OWN_MODULES)


def _examples():
    for name, calc in sorted(REGISTRY.items()):
        yield pytest.param(name, calc.example, id=f"{name}-example")
        for i, ex in enumerate(getattr(calc, "extra_examples", ()) or ()):
            yield pytest.param(name, ex, id=f"{name}-extra{i}")


def _is_sentence(h: str) -> bool:
    return len(h) > 20 and h.rstrip().endswith((".", "?", "!")) and not h[0].islower()


@pytest.mark.parametrize(("name", "body"), list(_examples()))
def test_every_example_has_a_computed_sentence(name, body, lookup):
    h = run(name, body, lookup)["headline"]
    assert _is_sentence(h), h
    assert not re.search(r"\b(None|nan|inf|True|False)\b|\{'|\['", h), h
    assert "\n" not in h


# --------------------------------------------------------------------------- sweeps

def _three(v):
    if isinstance(v, list):
        v = v[0]
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return [v, v * 2, v * 3]
    if 0 < v <= 1:
        return [v, v / 2, v / 4]
    return [v, v * 2 + 1, v * 3 + 2]


def _holder(value, key: str):
    """The first object inside `value` that has `key`, or None."""
    if isinstance(value, dict):
        if key in value:
            return value
        value = list(value.values())
    if isinstance(value, list):
        for v in value:
            found = _holder(v, key) if isinstance(v, (dict, list)) else None
            if found is not None:
                return found
    return None


def _sweep_body(calc, field: str):
    """The example with every top-level list collapsed to its first point and `field` swept over 3 points."""
    body = copy.deepcopy(calc.example)
    for k in calc.sweepable:
        if "." not in k and isinstance(body.get(k), list) and body[k] and not isinstance(body[k][0], (dict, list)):
            body[k] = body[k][0]
    path = field.split(".")
    node = body
    for p in path[:-1]:
        node = node.setdefault(p, {})
    if len(path) == 1 and field not in body:   # a per-item field (e.g. each candidate's prefix_hit_rate): its first holder
        node = _holder(body, field) or body
    values = _three(node[path[-1]]) if path[-1] in node else [1, 2, 3]
    if values is None:
        return None
    node[path[-1]] = values
    return body


@pytest.mark.parametrize("name", sorted(n for n, c in REGISTRY.items() if c.sweepable))
def test_sweep_on_the_first_sweepable_field_has_a_headline(name, lookup):
    calc = REGISTRY[name]
    # the first sweepable field; when the example cannot take it (it excludes another input the example uses,
    # or is not a top-level field), the first sweepable field the example gives
    candidates = [calc.sweepable[0]] + [f for f in calc.sweepable[1:] if f.split(".")[0] in calc.example]
    env = None
    for field in candidates:
        body = _sweep_body(calc, field)
        if body is None:
            continue
        try:
            env = run(name, body, lookup)
            break
        except RunError:
            continue
    assert env is not None, f"{name}: no sweepable field of the example could be swept"
    h = env["headline"]
    assert _is_sentence(h), h
    assert not re.search(r"\b(None|nan|True|False)\b|\{'|\['", h), h
    if name in OWN:
        assert "3 points" in h, h


# --------------------------------------------------------------------------- numbers agree with outputs

def _gb(h: str, label: str) -> tuple[float, float]:
    """(GB, GiB) of the first 'x GB (y GiB)' after `label` in a headline."""
    m = re.search(re.escape(label) + r"\D*?([\d.,]+) GB \(([\d.,]+) GiB\)", h)
    assert m, (label, h)
    return float(m.group(1).replace(",", "")), float(m.group(2).replace(",", ""))


def _close(printed: float, value: float, sig: int = 3):
    """`printed` is `value` at `sig` significant figures (whole numbers from 10^(sig-1) up, as the headlines print them)."""
    expected = round(value) if abs(value) >= 10 ** (sig - 1) else float(f"{value:.{sig}g}")
    assert printed == pytest.approx(expected, rel=1e-9, abs=1e-12), (printed, value)


def _num_after(h: str, label: str) -> float:
    m = re.search(re.escape(label) + r"\s*\$?(\d[\d,]*(?:\.\d+)?)", h)
    assert m, (label, h)
    return float(m.group(1).replace(",", ""))


def test_weight_memory_headline_numbers(lookup):
    env = run("weight-memory", {"model": "qwen3-8b", "format": "fp8", "devices": 2, "hardware": "h100-sxm"}, lookup)
    o, h = env["outputs"], env["headline"]
    gb, gib = _gb(h, "needs")
    _close(gb, o["bytes_total"] / 1e9)
    _close(gib, o["bytes_total"] / 2**30)
    gb_dev, _ = _gb(h, "weights,")
    _close(gb_dev, o["per_device_bytes"] / 1e9)
    assert "fits" in h and "Qwen3" in h and "H100" in h


def test_training_compute_headline_numbers(lookup):
    env = run("training-compute", {"params": 7e9, "tokens": 1e12, "peak_flop_per_s": 1e15, "devices": 64, "mfu": 0.5}, lookup)
    o, h = env["outputs"], env["headline"]
    assert "4.2e22 FLOP" in h and f"{o['flops_total']:.2g}".replace("+", "") in h
    _close(_num_after(h, "FLOP:"), o["days"])
    assert "days" in h
    _close(_num_after(h, "("), o["gpu_hours"])


def test_checkpoint_headline_numbers(lookup):
    env = run("checkpoint", {"params": 7e9, "write_bandwidth_bytes_per_s": 2e9, "interval_s": 3600, "mtbf_s": 86400}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_gb(h, "is")[0], o["checkpoint_bytes"] / 1e9)
    _close(_num_after(h, "takes"), o["write_s"])
    _close(_num_after(h, "Young interval is"), o["young_interval_s"] / 60)


def test_collective_headline_numbers(lookup):
    env = run("collective", {"operation": "all_reduce", "ranks": 8, "message_bytes": 1e9, "link_alpha_s": 5e-6,
                             "link_bandwidth_bytes_per_s": 100e9}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "takes"), o["time_s"] * 1e3)
    assert " ms " in h and "bandwidth-bound" in h and "8 ranks" in h


def test_transfer_and_inflight_headline_numbers(lookup):
    env = run("transfer-path", REGISTRY["transfer-path"].example, lookup)
    o, h = env["outputs"], env["headline"]
    best = next(p for p in o["plans"] if p["label"] == o["fastest"])
    assert o["fastest"] in h
    _close(_num_after(h, "”:"), best["total_time_s"] * 1e3)
    env = run("inflight-window", REGISTRY["inflight-window"].example, lookup)
    assert f"needs {env['outputs']['required_inflight']} requests" in env["headline"]


def test_kv_eviction_headline_numbers(lookup):
    env = run("kv-eviction", {"model": "llama-3.1-8b", "tokens": 32768, "recent_tokens": 2048, "sink_tokens": 4}, lookup)
    o, h = env["outputs"], env["headline"]
    assert f"keeps {o['entries_kept']:,} entries" in h
    gb = re.findall(r"([\d.,]+) (?:GB|MB) \(", h)
    assert len(gb) >= 2
    _close(float(gb[1]), o["bytes_full_per_request"] / 1e9)


def test_moe_headline_numbers(lookup):
    env = run("moe", {"model": "qwen3-235b-a22b", "tokens": 16}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "touches"), o["expected_distinct_experts"])
    env = run("moe-placement", {"model": "qwen3-235b-a22b", "ep": 16}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_gb(h, "take")[0], o["routed_bytes_all_layers"] / 1e9)
    _close(_gb(h, "per layer,")[0], o["per_rank_bytes"] / 1e9)


def test_overlap_headline_numbers(lookup):
    env = run("overlap-timeline", {"stages": [{"name": "a", "duration_s": 0.002}, {"name": "b", "duration_s": 0.003}], "items": 10}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "takes"), o["total_s"] * 1e3)
    _close(_num_after(h, "against"), o["serial_s"] * 1e3)
    assert "bottleneck: b" in h


def test_prefix_cache_headline_numbers(lookup):
    env = run("prefix-cache", REGISTRY["prefix-cache"].example, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_gb(h, "saves")[0], o["kv_bytes_saved"] / 1e9)
    _close(_num_after(h, "and"), o["ttft_saved_per_hit_s"] * 1e3)


def test_quantization_headline_numbers(lookup):
    env = run("quantization", {"values": 1e9, "format": "q4_0"}, lookup)
    o, h = env["outputs"], env["headline"]
    m = re.search(r"take ([\d.]+) MB \(([\d.]+) MiB\)", h)
    assert m, h
    _close(float(m.group(1)), o["total_bytes"] / 1e6)
    _close(float(m.group(2)), o["total_bytes"] / 2**20)
    _close(_num_after(h, "with scales),"), o["compression_vs_reference"])


def test_queueing_headline_numbers(lookup):
    env = run("queueing", {"arrival_rate_per_s": 5, "service_s": 0.1, "service": "exponential"}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "runs at"), o["utilisation"] * 100)
    _close(_num_after(h, "wait"), o["wait_s"] * 1e3)
    env = run("queueing", {"arrival_rate_per_s": 20, "service_s": 0.1}, lookup)
    assert "unstable" in env["headline"]
    for name in ("backlog", "capacity", "remaining-time"):
        env = run(name, REGISTRY[name].example, lookup)
        o, h = env["outputs"], env["headline"]
        if name == "backlog":
            _close(_num_after(h, "backlog of"), o["backlog_items"])
        elif name == "capacity":
            assert o["bottleneck"] in h
            _close(_num_after(h, "throughput at"), o["max_rate_per_s"])
        else:
            _close(_num_after(h, "need"), o["conditional_remaining_s"])


def test_rl_headline_numbers(lookup):
    env = run("rl-pipeline", {"generator_samples_per_s": 10, "verifier_samples_per_s": 6, "learner_samples_per_s": 8,
                              "reject_fraction": 0.5}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "At most"), o["supply"]["accepted_samples_per_s"])
    assert o["supply"]["bound"] in h
    env = run("rl-recovery", REGISTRY["rl-recovery"].example, lookup)
    _close(_num_after(env["headline"], "saving"), env["outputs"]["failure"]["saved_s"] / 60)
    env = run("rl-rollout-tail", {"long_fraction": 0.2, "short_s": 2, "long_s": 30}, lookup)
    _close(_num_after(env["headline"], "takes"), env["outputs"]["single_expected_s"])
    env = run("rl-policy-ratio", {"logp_current": -2.0, "logp_behavior": -2.5}, lookup)
    _close(_num_after(env["headline"], "policy is"), env["outputs"]["behavior_ratio"], 4)


def test_roofline_and_energy_headline_numbers(lookup):
    env = run("roofline", {"model": "qwen3-8b", "hardware": "h100-sxm", "batch": 8, "context_tokens": 2048}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "at least"), o["time_s"] * 1e3)
    assert f"{o['bound']}-bound" in h
    _close(_num_after(h, "):"), o["tokens_per_s"])
    env = run("energy", REGISTRY["energy"].example, lookup)
    _close(_num_after(env["headline"], "draw"), env["outputs"]["power_w"])
    _close(_num_after(env["headline"], "use"), env["outputs"]["energy_kwh"])


def test_serving_cost_headline_numbers(lookup):
    body = dict(REGISTRY["serving-cost"].example, batch=16)
    env = run("serving-cost", body, lookup)
    o, h = env["outputs"], env["headline"]
    assert f"${o['cost_per_mtok_usd']:,.2f} per million" in h
    assert f"{o['total_devices']:,.0f} devices" in h


def test_speculative_headline_numbers(lookup):
    env = run("speculative-decoding", {"acceptance_rate": 0.8, "draft_tokens": 5}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "yields"), o["expected_tokens_per_round"])
    _close(_num_after(h, "a"), o["speedup"])
    assert f"best draft length is {o['best_k']}" in h
    env = run("speculative-verify-budget", REGISTRY["speculative-verify-budget"].example, lookup)
    assert f"needs {env['outputs']['needed_rows']} rows" in env["headline"]


def test_tp_overhead_headline_numbers(lookup):
    env = run("tp-overhead", {"model": "llama-3.1-70b", "tokens": 4096, "tp": 8, "link_alpha_s": 3e-6,
                              "link_bandwidth_bytes_per_s": 150e9}, lookup)
    o, h = env["outputs"], env["headline"]
    assert f"runs {o['allreduces']} all-reduces" in h
    _close(_num_after(h, "MiB),"), o["total_s"] * 1e3)


def test_break_even_headline_numbers(lookup):
    env = run("break-even", {"one_off": 10, "saving_per_use": 0.3, "uses": 100}, lookup)
    o, h = env["outputs"], env["headline"]
    _close(_num_after(h, "after"), o["break_even_uses"])
    assert "gains" in h
    env = run("break-even", {"one_off": 10, "saving_per_use": -1}, lookup)
    assert "never pays back" in env["headline"]
    env = run("mixture-choice", REGISTRY["mixture-choice"].example, lookup)
    assert env["outputs"]["best"] in env["headline"]
    _close(_num_after(env["headline"], "flips at p ="), env["outputs"]["crossings"][0]["probability"])


# --------------------------------------------------------------------------- formatting helpers

def test_formatting_helpers_label_units_and_never_raise():
    assert hf.fmt_bytes(21.47e9) == "21.5 GB (20.0 GiB)"
    assert hf.fmt_bytes(80 * 2**30) == "85.9 GB (80.0 GiB)"
    assert hf.fmt_bytes(512) == "512 B"
    assert hf.fmt_seconds(0.0032) == "3.2 ms" and hf.fmt_seconds(90) == "90 s" and hf.fmt_seconds(7200) == "2 h"
    assert hf.fmt_usd(1234.5) == "$1,234.50" and hf.fmt_usd(0.000012) == "$0.000012"
    assert hf.fmt_count(26) == "26" and hf.fmt_big(1e11) == "100 billion"
    assert hf.fmt_pct(0.256) == "25.6%" and hf.plural(1, "request") == "1 request" and hf.plural(3, "request") == "3 requests"
    assert hf.sweep_note([1, 2, 3]) == " at the first of 3 points" and hf.sweep_note(5) == ""
    for f in (hf.fmt_bytes, hf.fmt_seconds, hf.fmt_usd, hf.fmt_count, hf.fmt_num, hf.fmt_rate, hf.fmt_flops,
              hf.fmt_flop_rate, hf.fmt_pct, hf.fmt_big):
        for v in (None, math.nan, math.inf, -math.inf, 0, -1.5, 1e-12, 1e30, [], [None, 1.0], [3.0, 4.0]):
            assert isinstance(f(v), str)
    assert hf.fmt_bytes([2e9, 1]) == hf.fmt_bytes(2e9)
    assert hf.get({"a": [{"b": 1}]}, "a", 0, "b") == 1 and hf.get({"a": None}, "a", "b") is None

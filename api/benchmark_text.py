"""Published benchmark points in words: the load, the framework and the parallel split of a point, the nearest
points to a loose question ("what did anyone measure for X on Y?") and a short table of them.

The site pages (`api.site.benchmarks`) and the MCP tool `find_benchmarks` (`api.mcp_server`) read points the same
way; the REST list (`/api/v1/benchmarks`) filters exactly instead.
"""
from __future__ import annotations

import re
from typing import Any

from calculators.framework import fmt_s, num


def load_text(point: dict[str, Any]) -> str:
    """The load of a point in words: `concurrency 64`, `Poisson 4 req/s`, `offline`, `server scenario 83.5 req/s`."""
    load = point.get("load") or {}
    if load.get("concurrency"):
        return f"concurrency {load['concurrency']}"
    if load.get("requests_per_s"):
        return f"Poisson {load['requests_per_s']:g} req/s"
    if load.get("offline"):
        return "offline"
    if load.get("server_scenario"):
        qps = load.get("target_qps")
        return "server scenario" + (f" {qps:g} req/s" if qps else "")
    return "—"


def framework_text(point: dict[str, Any]) -> str:
    """`vllm 0.10.2`, or the named framework of an `other` point."""
    name = point.get("framework_name") if point.get("framework") == "other" else point.get("framework")
    return f"{name} {point['framework_version']}" if point.get("framework_version") else str(name)


def split_text(point: dict[str, Any]) -> str:
    """`TP8 · EP8 · DP-attn`: the parallel layout of a point (PP, EP and replicas only when not 1)."""
    parts = [f"TP{point.get('tp', 1)}"]
    if (point.get("pp") or 1) > 1:
        parts.append(f"PP{point['pp']}")
    ep = point.get("ep", 1)
    if ep is None:
        parts.append("EP not stated")
    elif ep > 1:
        parts.append(f"EP{ep}")
    if point.get("dp_attention"):
        parts.append("DP-attn")
    if (point.get("replicas") or 1) > 1:
        parts.append(f"× {point['replicas']}")
    return " · ".join(parts)


def latency(point: dict[str, Any], name: str) -> tuple[float | None, str]:
    """A latency's median where the source prints one, else its mean: (seconds, which); (None, "") when absent."""
    lat = (point.get("measured") or {}).get(name) or {}
    for stat in ("median", "mean"):
        if lat.get(stat) is not None:
            return lat[stat], stat
    return None, ""


# --------------------------------------------------------------------------- nearest points to a loose question

def _norm(text: Any) -> str:
    """Lowercase letters and digits only: `Llama-3.1-405B` and `llama 3.1 405b` read alike."""
    return re.sub(r"[^a-z0-9]", "", str(text or "").lower())


def _closeness(wanted: str | None, exact: tuple[Any, ...]) -> int | None:
    """0 when `wanted` is one of `exact` (case-insensitive), 1 when it is inside one of them ignoring punctuation,
    2 when one of them is inside it, None when unrelated (and 0 when nothing is wanted)."""
    if not wanted:
        return 0
    w = wanted.strip().lower()
    names = [str(e) for e in exact if e]
    if any(w == n.lower() for n in names):
        return 0
    nw = _norm(w)
    if nw and any(nw in _norm(n) for n in names):
        return 1
    if any(_norm(n) and _norm(n) in nw for n in names):
        return 2
    return None


def nearest(points: list[dict[str, Any]], model: str | None = None, hardware: str | None = None,
            framework: str | None = None) -> list[dict[str, Any]]:
    """The points for a model on an accelerator, nearest first: an exact store id or published name before a part of
    one (`405b` finds every Llama-3.1-405B point), in store order (model, accelerator, configuration) within a rank.
    `framework` filters exactly. Points unrelated to a given model or accelerator are left out."""
    ranked = []
    for i, p in enumerate(points):
        if framework and p.get("framework") != framework:
            continue
        m = _closeness(model, (p.get("model"), p.get("model_hf")))
        h = _closeness(hardware, (p.get("hardware"), p.get("hardware_name")))
        if m is None or h is None:
            continue
        ranked.append((m + h, i, p))
    return [p for _, _, p in sorted(ranked, key=lambda t: (t[0], t[1]))]


def row(point: dict[str, Any]) -> dict[str, Any]:
    """A point as a compact row (SI units in the names), for small contexts."""
    m = point.get("measured") or {}
    ttft, ttft_stat = latency(point, "ttft_s")
    tpot, tpot_stat = latency(point, "tpot_s")
    out = {"id": point["id"], "model": point.get("model"), "model_hf": point.get("model_hf"),
           "hardware": point.get("hardware"), "hardware_name": point.get("hardware_name"),
           "devices": point.get("devices"), "framework": framework_text(point), "split": split_text(point),
           "weight_format": point.get("weight_format"), "input_tokens": point.get("input_tokens"),
           "output_tokens": point.get("output_tokens"), "load": load_text(point),
           f"ttft_{ttft_stat}_s" if ttft_stat else "ttft_s": ttft, f"tpot_{tpot_stat}_s" if tpot_stat else "tpot_s": tpot,
           "output_tokens_per_s_per_device": m.get("output_tokens_per_s_per_device"),
           "output_tokens_per_s": m.get("output_tokens_per_s"), "source": point.get("source"),
           "url": point.get("url"), "locator": point.get("locator"), "date": point.get("date")}
    return {k: v for k, v in out.items() if v is not None}


def _cell(value: Any) -> str:
    return "—" if value is None else str(value).replace("|", "/")


def table(points: list[dict[str, Any]]) -> str:
    """A short Markdown table of points (TTFT and TPOT as the median, else the mean), and where each one is."""
    lines = ["| point | framework | devices · split | ISL/OSL | load | TTFT | TPOT | output tok/s per device | source |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        ttft, ttft_stat = latency(p, "ttft_s")
        tpot, tpot_stat = latency(p, "tpot_s")
        per = (p.get("measured") or {}).get("output_tokens_per_s_per_device")
        tokens = "/".join(num(p[k], 5) if p.get(k) is not None else "?" for k in ("input_tokens", "output_tokens"))
        lines.append("| " + " | ".join(_cell(c) for c in (
            p["id"], framework_text(p), f"{p.get('devices')} × {p.get('hardware_name')} · {split_text(p)}", tokens,
            load_text(p), f"{fmt_s(ttft)} {ttft_stat}" if ttft is not None else None,
            f"{fmt_s(tpot)} {tpot_stat}" if tpot is not None else None, num(per, 5) if per is not None else None,
            p.get("source"))) + " |")
    lines.append("")
    lines += [f"- {p['id']}: {p.get('url')} ({p.get('date')})" for p in points]
    return "\n".join(lines)

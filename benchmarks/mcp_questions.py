"""Ten questions a user asks, put to the MCP server the way an agent would; prints how many tool
calls each took, the answer's headline, and the size of `tools/list`.

Run: `.venv/bin/python benchmarks/mcp_questions.py` (starts its own server on the default store), or
`--url http://host:port` for a running one. `tests/api/test_mcp_questions.py` asks the same questions
and checks every answer.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import anyio
import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
Call = tuple[str, dict]


def payload(result) -> Any:
    """A tool result's structured content, or its JSON text."""
    if result.is_error:
        raise AssertionError(result.content[0].text)
    if getattr(result, "structured_content", None):
        return result.structured_content
    return json.loads(result.content[0].text)


@dataclass
class Question:
    """A question, the tool calls that answer it (later calls may read earlier answers) and a check
    that reads the answer out of the last results and fails if it is not there."""

    text: str
    plan: Callable[[list[Any]], Call | None]   # given the answers so far, the next call (None: done)
    answer: Callable[[list[Any]], str]          # the answer in one line, asserting what it relies on


def steps(*calls: Call | Callable[[list[Any]], Call]) -> Callable[[list[Any]], Call | None]:
    """A plan from a fixed sequence of calls (a callable builds its call from the answers so far)."""
    def plan(answers: list[Any]) -> Call | None:
        if len(answers) >= len(calls):
            return None
        c = calls[len(answers)]
        return c(answers) if callable(c) else c
    return plan


def _kv_ratio(a: list[Any]) -> str:
    mla, gqa = (x["outputs"]["bytes_per_token"] for x in a)
    assert 0 < mla < gqa, (mla, gqa)
    return f"MLA {mla:,} B/token vs GQA {gqa:,} B/token: {gqa / mla:.1f}× less KV with MLA"


def _compare(a: list[Any]) -> str:
    def bw(h: dict) -> float:
        return float(h["memory_bandwidth_bytes_per_s"]["value"])
    h100, b200 = a
    assert bw(b200) > bw(h100)
    return f"HBM bandwidth {bw(h100) / 1e12:.2f} TB/s (H100 SXM) vs {bw(b200) / 1e12:.2f} TB/s (B200): ×{bw(b200) / bw(h100):.1f}"


def _headline(a: list[Any]) -> str:
    head = a[-1]["headline"]
    assert head and head.endswith((".", "?", "!")), head
    return head


QUESTIONS: list[Question] = [
    Question("Do 16 requests of Llama-3.1-70B at 32k tokens in FP8 fit on 8 × H100 SXM?",
             steps(("kv_cache", {"model": "llama-3.1-70b", "tokens": 32768, "kv_format": "fp8", "requests": 16,
                                 "tp": 8, "hardware": "h100-sxm"})),
             _headline),
    Question("Which tensor-parallel degree for Llama-3.1-70B on H100 over NVLink, and over a PCIe-class link?",
             steps(("parallel_split", {"model": "llama-3.1-70b", "hardware": "h100-sxm", "link": "nvlink4",
                                       "context_tokens": 8192, "batch": 8, "tp": [1, 2, 4, 8],
                                       "what_if": [{"label": "PCIe 4 x16", "link": "pcie4-x16"}]})),
             _headline),
    Question("How many rank-16 q/v LoRA adapters of Qwen3-8B fit in 8 GiB?",
             steps(("lora", {"model": "qwen3-8b", "rank": 16, "target_modules": ["q_proj", "v_proj"],
                             "memory_budget_bytes": 8 * 2**30})),
             lambda a: f"{a[-1]['outputs']['adapters_that_fit']:,} adapters — " + _headline(a)),
    Question("Which of two models is cheaper per successful task, a cheap one passing 60 % or a dear one passing 90 %?",
             steps(("routing_cost", {"tasks": 1000, "candidates": [
                 {"name": "small", "price_per_million_tokens_usd": {"input": 0.3, "output": 1.2},
                  "usage": {"new_input_tokens": 3000, "output_tokens": 800}, "pass_rate": 0.6},
                 {"name": "large", "price_per_million_tokens_usd": {"input": 3, "output": 15},
                  "usage": {"new_input_tokens": 3000, "output_tokens": 800}, "pass_rate": 0.9}]})),
             _headline),
    Question("Is it faster to ship a 45-megapixel RAW frame over a 20 Mbit/s uplink or to process it on the device in 4 s?",
             steps(("edge_transfer", {"raw": {"width": 8192, "height": 5464, "bits_per_pixel": 14, "frames": 1},
                                      "download_bytes": 5e6, "uplink_bits_per_s": 2e7, "downlink_bits_per_s": 1e8,
                                      "rtt_s": 0.1, "processing_s": 0.3, "on_device": {"processing_s": 4.0}})),
             lambda a: f"faster: {a[-1]['outputs']['faster']} — " + _headline(a)),
    Question("What speed-up does speculative decoding give at 70 % acceptance with 4 draft tokens?",
             steps(("list_calculators", {"q": "speculative"}),
                   ("describe_calculator", {"name": "speculative-decoding"}),
                   ("calculate", {"name": "speculative-decoding",
                                  "request": {"acceptance_rate": 0.7, "draft_tokens": 4, "draft_cost_ratio": 0.05,
                                              "target_step_s": 0.02}})),
             _headline),
    Question("What does serving Llama-3.1-70B on H100 SXM cost per million output tokens?",
             steps(("calculate", {"name": "serving-cost",
                                  "request": {"model": "llama-3.1-70b", "hardware": "h100-sxm", "target_tokens_per_s": 1000,
                                              "context_tokens": 4096}})),
             _headline),
    Question("What does the book say about prefix caching?",
             steps(("search", {"q": "prefix caching", "kind": ["case"], "limit": 3}),
                   lambda a: ("get_case", {"slug": a[0]["items"][0]["id"]})),
             lambda a: f"{a[-1]['title_en']}: {a[-1]['summary'][:160]}…"),
    Question("How do H100 SXM and B200 compare in memory bandwidth?",
             steps(("get_hardware", {"hardware_id": "h100-sxm"}), ("get_hardware", {"hardware_id": "b200-sxm"})),
             _compare),
    Question("How much less KV cache does MLA (DeepSeek-V3) need per token than GQA (Llama-3.1-70B)?",
             steps(("kv_cache", {"model": "deepseek-v3", "tokens": 32768}),
                   ("kv_cache", {"model": "llama-3.1-70b", "tokens": 32768})),
             _kv_ratio),
]


async def _ask(url: str) -> tuple[int, list[dict]]:
    rows = []
    async with streamable_http_client(url + "/mcp") as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            listed = await session.list_tools()
            size = len(json.dumps(listed.model_dump(mode="json", exclude_none=True, by_alias=True),
                                  separators=(",", ":"), ensure_ascii=False).encode())
            for q in QUESTIONS:
                answers: list[Any] = []
                calls: list[str] = []
                while (call := q.plan(answers)) is not None:
                    tool, args = call
                    calls.append(tool)
                    answers.append(payload(await session.call_tool(tool, args)))
                rows.append({"question": q.text, "calls": len(calls), "tools": calls, "answer": q.answer(answers)})
    return size, rows


def ask(url: str) -> tuple[int, list[dict]]:
    """(bytes of the tools/list result, one row per question: calls, tools used, answer)."""
    return anyio.run(_ask, url)


def _serve() -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], cwd=ROOT, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("the server did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", help="a running server (default: start one on the default store)")
    args = parser.parse_args()
    proc, url = (None, args.url) if args.url else _serve()
    try:
        size, rows = ask(url)
    finally:
        if proc:
            proc.terminate()
    print(f"tools/list: {size:,} bytes of JSON")
    for i, r in enumerate(rows, 1):
        print(f"{i:2}. [{r['calls']} call{'s' if r['calls'] > 1 else ''}: {', '.join(r['tools'])}] {r['question']}\n    → {r['answer']}")
    print(f"total: {sum(r['calls'] for r in rows)} calls for {len(rows)} questions")


if __name__ == "__main__":
    main()

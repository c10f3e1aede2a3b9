"""`/llms.txt`: a plain-text map of the service for language models (what, endpoints, tools)."""
from __future__ import annotations

from calculators.framework.registry import REGISTRY


def llms_txt(counts: dict[str, int]) -> str:
    lines = [
        "# AI Infra Casebook",
        "",
        "> Sourced AI-infrastructure facts (accelerators, links, model architectures, frameworks, prices), the "
        f"worked examples of the {counts.get('case', 71)} case studies of the book 深入理解 AI Infra (bojieli/ai-infra-book), "
        "and calculators that show their work: every answer carries its inputs with sources, formula steps with the "
        "numbers substituted, assumptions and links to the cases.",
        "",
        "Conventions: SI base units with the unit in the field name (_bytes, _bytes_per_s, _bits_per_s, _s, _flop_per_s, "
        "_w); decimal GB = 1e9 B and binary GiB = 2^30 B are labelled. Errors are RFC 9457 application/problem+json with "
        "`errors[].field`. Lists take limit/offset and return total. Unknown ids in a calculator request are 422 naming the field.",
        "",
        "## Calculators (POST JSON; add `Accept: text/markdown` for a Markdown explanation)",
    ]
    for c in REGISTRY.values():
        sweep = f" Sweepable: {', '.join(c.sweepable)}." if c.sweepable else ""
        if c.grid:
            sweep += f" `grid: true` takes every combination of {', '.join(c.grid)} (nested outputs, `grid_shape`)."
        lines.append(f"- [POST /api/v1/calculators/{c.name}](/api/v1/calculators/{c.name}): {c.summary}{sweep}")
    lines += [
        "- Serving questions (\"if I deploy this, what will `vllm bench serve` show?\"): POST serving-estimate with "
        "model, hardware, tp/pp/ep, input/output tokens and a load (concurrency, arrival_rate_per_s, or neither for "
        "offline); it names the nearest published measurements, estimated the same way, and its error on each. "
        "deployment-plan searches hardware, TP/PP/EP and batch for an SLO.",
        "- [POST /api/v1/calculators:batch](/docs#/calculators/run_batch): up to 1,000 calculator requests, answered in order.",
        "- [GET /api/v1/calculators](/api/v1/calculators): every calculator with its request JSON schema and an example.",
        "",
        "## Facts and cases (GET JSON)",
        f"- [/api/v1/cases](/api/v1/cases): the {counts.get('case', 71)} case studies (?chapter=8); /api/v1/cases/{{slug}} with its worked examples.",
        f"- [/api/v1/derivations](/api/v1/derivations): {counts.get('derivation', 0)} worked examples, each with its calculator request where bound.",
        f"- [/api/v1/derivations/{{case_slug}}/{{name}}](/api/v1/derivations): one worked example with its check.",
        f"- [/api/v1/models](/api/v1/models): {counts.get('model', 0)} model architectures (?family=qwen); /api/v1/models/{{id}}, e.g. "
        "qwen3-8b (case-insensitive, or a Hugging Face name with or without -Instruct); "
        "[/api/v1/models/{owner}/{model_id}](/api/v1/models/meta-llama/Llama-3.1-8B-Instruct) by Hugging Face repo name "
        "(the page is /models/{owner}/{model_id}).",
        f"- [/api/v1/hardware](/api/v1/hardware): {counts.get('hardware', 0)} accelerators and systems (?vendor=AMD&kind=data-centre-gpu; "
        "kind is data-centre-gpu, accelerator, laptop-desktop or rack-system, and every record says its kind); e.g. h100-sxm.",
        f"- [/api/v1/links](/api/v1/links): {counts.get('link', 0)} interconnects with one-way bandwidth and direction convention.",
        f"- [/api/v1/frameworks](/api/v1/frameworks): {counts.get('framework', 0)} frameworks with dated feature rows.",
        "- [/api/v1/prices](/api/v1/prices), [/api/v1/sources](/api/v1/sources), [/api/v1/glossary](/api/v1/glossary), [/api/v1/claims](/api/v1/claims).",
        "- [/api/v1/search?q=](/api/v1/search?q=kv%20cache): ranked search, English or Chinese (q=推测解码).",
        "- [/api/v1/coverage](/api/v1/coverage): which worked examples a calculator recomputes.",
        "",
        "## Measured data (GET JSON; NVIDIA aiconfigurator-core 0.12.0 tables, Apache-2.0, copied unmodified)",
        "- [/api/v1/measurements](/api/v1/measurements): the measured tables with provenance (system, table, framework, "
        "version, GPU, path in the wheel, sha256); ?system=h100_sxm&table=nccl.",
        "- [/api/v1/measurements/{table}](/api/v1/measurements/nccl?system=h100_sxm&op_name=all_reduce&num_gpus=8): rows of "
        "nccl, custom_allreduce, gemm, context_attention, generation_attention or moe, filtered by any column; `latency` is "
        "in ms and `message_size` in elements as published, with `latency_s` and `message_bytes` added.",
        "- [/api/v1/measurements/fits](/api/v1/measurements/fits?system=h100_sxm&table=nccl): the α–β fits of the measured "
        "all-reduces per system, table and GPU count (T = a + M/b by least squares on relative error; ring reading "
        "α = a/(2(p−1)), B = b·2(p−1)/p), with RMS and max relative residual and the measured file and sha256; ?system, ?table, ?gpus.",
        "",
        "## Published serving measurements and how well the estimates match them (GET JSON)",
        f"- [/api/v1/benchmarks](/api/v1/benchmarks): {counts.get('benchmark', 0) or 'the'} end-to-end serving results as "
        "published (MLPerf Inference, InferenceX, vendor and framework pages), each with its full configuration, source, "
        "locator and date; filter by model (store id or Hugging Face name), hardware, framework, source, weight_format, "
        "devices, input/output tokens, concurrency; /api/v1/benchmarks/{benchmark_id} for one point.",
        "- [/api/v1/validation](/api/v1/validation): serving-estimate recomputed for every stored point, predicted against "
        "measured, with the error distribution by source, hardware, model family and framework; "
        "/api/v1/validation/{benchmark_id} for one point. The page is /validation.",
        "- [/api/v1/calibration](/api/v1/calibration): the measured step estimate against the peak-rate bound over a fixed "
        "grid of models, batches, contexts and TP degrees. The page is /calibration.",
        "",
        "## MCP",
        "- Streamable HTTP at /mcp, stateless; every tool read-only and idempotent. Generic: list_calculators, "
        "describe_calculator(name), calculate(name, request) reach every calculator. Direct tools for kv_cache, "
        "parallel_split, lora, routing_cost, edge_transfer, deployment_plan, serving_cost, roofline (structured results "
        "with an outputSchema). Look-ups: list_models, list_hardware, list_links, list_cases, get_model, get_hardware, "
        "get_link, get_case, find_benchmarks (what anyone measured for a model on a device), search (English or Chinese: "
        "cases, calculators, glossary, facts). Errors list every field "
        "to fix with did-you-mean suggestions.",
        "",
        "## Documentation",
        "- [/openapi.json](/openapi.json) (OpenAPI 3.1, operationIds are function names; errors are a typed Problem), "
        "[/docs](/docs) and [/redoc](/redoc) (served locally, no CDN), the HTML site at [/](/).",
        "- [/api/v1/export](/api/v1/export): every table as CSV and Parquet and the DuckDB file, with the content hash "
        "(/api/v1/export/{kind}.csv, /api/v1/export/{kind}.parquet, /api/v1/export/casebook.duckdb); the page is "
        "[/downloads](/downloads).",
    ]
    return "\n".join(lines) + "\n"

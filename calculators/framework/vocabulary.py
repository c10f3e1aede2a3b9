"""One vocabulary for request fields: a concept has one name, with one meaning, in every calculator.

`VOCABULARY` names the shared concepts and what each means; `SYNONYMS` maps every other spelling met so far (the
old names of renamed fields, and the obvious variants) to its canonical name. A request that still uses a synonym is
read as the canonical field and its answer says so (`calculators.framework.request`); the synonyms are not fields, so
they are absent from the OpenAPI document. `KEPT` lists the few places where a field is spelt like a synonym but means
something else there, with the reason. The vocabulary test (`test_vocabulary.py`) walks every request model of the
registry against these tables; the contributing guide of the calculators package shows them as a table.
"""
from __future__ import annotations

#: canonical field name -> what it means (the unit is in the name)
VOCABULARY: dict[str, str] = {
    # what is computed with
    "model": "a model id of the store (its shapes, parameter counts and published weight format)",
    "model_config": "a Hugging Face config.json object, instead of `model`",
    "hardware": "a hardware id of the store: per-device memory, bandwidth and peaks come from its record",
    "link": "a link id of the store: its latency α and one-way bandwidth (deployment-plan, which weighs several "
            "hardware, takes one per hardware id)",
    # parallelism
    "tp": "tensor-parallel degree: ranks that split every layer",
    "pp": "pipeline-parallel stages",
    "ep": "expert-parallel degree: ranks the routed experts are spread over",
    "devices": "devices (GPUs) taking part, whatever the split",
    # formats and sizes
    "weight_format": "storage format of the model's weights: a format name or a {bits_per_value, group_size, ...} spec",
    "kv_format": "storage format of the KV cache",
    "state_format": "storage format of recurrent (KDA/SSM) state",
    "weight_bytes_per_param": "bytes per weight parameter as a plain number, where a calculator takes one instead of "
                              "a format",
    "kv_bytes_per_value": "bytes per cached KV value as a plain number, where a calculator takes one instead of "
                          "`kv_format`",
    "adapter_bytes_per_param": "bytes per LoRA adapter parameter (2 = BF16)",
    "weight_bytes": "bytes of the weights resident in memory",
    "kv_bytes_per_token": "KV bytes per token of full history, instead of a model",
    "bytes_per_element": "bytes of one element of a tensor or array",
    "params": "a parameter count",
    "hidden_size": "the model width d",
    "ffn_matrices": "weight matrices per FFN or expert (3 for SwiGLU: gate, up, down)",
    # memory
    "memory_budget_bytes": "memory the calculator may fill, bytes; what it knows to be resident there (a model's "
                           "weights, shared bytes) is taken out first and shown as a step (`subtract_weights: false` "
                           "where the budget is already net of the weights)",
    "subtract_weights": "whether a memory budget still holds the model's weights (default: yes when the weights are "
                        "known)",
    "memory_per_device_bytes": "memory capacity of one device, bytes",
    "memory_utilization": "fraction of device memory the engine may use (vLLM's gpu_memory_utilization)",
    "runtime_reserve_bytes": "bytes reserved per device on top of the utilization",
    # rates
    "peak_flop_per_s": "peak FLOP/s of one device: the ideal rate, scaled by `compute_efficiency` (or `mfu`) where a "
                       "calculator takes one",
    "compute_efficiency": "fraction of the peak FLOP/s the work reaches",
    "memory_bandwidth_bytes_per_s": "memory (HBM) bandwidth of one device, B/s",
    "link_bandwidth_bytes_per_s": "one-way bandwidth of a link, B/s (not a bidirectional aggregate)",
    "link_alpha_s": "start-up latency α of a link per dependent round, s",
    "arrival_rate_per_s": "requests arriving per second, an input (an output named `requests_per_s` is something "
                          "else: requests completed per second, a throughput, e.g. inflight-window's)",
    # serving
    "batch": "sequences (or items) processed together in one step",
    "ttft_s": "time to first token, s",
    "tpot_s": "time per output token, s (a target where the calculator asks for one)",
    "prefix_hit_rate": "fraction of requests that find the shared prefix in the cache (0..1)",
    "new_input_tokens": "input tokens of a request after the cached prefix",
    "target_utilization": "utilization to stay under (0..1; American spelling, like `memory_utilization`)",
    # prices
    "price_per_device_hour_usd": "rent of one device per hour, USD",
    "price_per_hour_usd": "rent of a whole pool or instance per hour, USD",
    "price_per_million_tokens_usd": "prices per million tokens {input, cache_read, cache_write, output}, USD (or any "
                                    "one currency used throughout the request)",
    # images
    "width_px": "image width, pixels",
    "height_px": "image height, pixels",
    "megapixels": "image size in millions of pixels (1 MP = 10^6 pixels, decimal)",
}

#: another spelling -> the canonical name (a body using it is answered with a note naming the canonical one)
SYNONYMS: dict[str, str] = {
    "tensor_parallel": "tp",
    "ep_ranks": "ep",
    "state_dtype": "state_format",
    "bytes_per_param": "weight_bytes_per_param",
    "dtype_bytes": "adapter_bytes_per_param",
    "weights_bytes": "weight_bytes",
    "element_bytes": "bytes_per_element",
    "hidden": "hidden_size",
    "matrices_per_expert": "ffn_matrices",
    "budget_bytes": "memory_budget_bytes",
    "memory_bytes": "memory_per_device_bytes",
    "device_memory_bytes": "memory_per_device_bytes",
    "memory_utilisation": "memory_utilization",
    "flop_per_s": "peak_flop_per_s",
    "prefill_flop_per_s": "peak_flop_per_s",
    "device_flop_per_s": "peak_flop_per_s",
    "hbm_bandwidth_bytes_per_s": "memory_bandwidth_bytes_per_s",
    "link_bytes_per_s": "link_bandwidth_bytes_per_s",
    "bandwidth_bytes_per_s": "link_bandwidth_bytes_per_s",
    "alpha_s": "link_alpha_s",
    "interconnect": "link",
    "requests_per_s": "arrival_rate_per_s",
    "batch_size": "batch",
    "tpot_target_s": "tpot_s",
    "hit_rate": "prefix_hit_rate",
    "cache_hit_rate": "prefix_hit_rate",
    "new_tokens_per_request": "new_input_tokens",
    "target_utilisation": "target_utilization",
    "price_per_mtok": "price_per_million_tokens_usd",
    "usd_per_hour": "price_per_hour_usd",
    "width": "width_px",
    "height": "height_px",
}

#: (calculator, field path) spelt like a synonym that means something else there -> why it keeps its name
KEPT: dict[tuple[str, str], str] = {
    ("overlap-timeline", "stages.flop_per_s"): "the rate one pipeline stage achieves, not a device peak",
    ("overlap-timeline", "what_if.stages.flop_per_s"): "the rate one pipeline stage achieves, not a device peak",
    ("moe-placement", "replica_balance.flop_per_s"): "the rate one rank achieves on its rows, not a device peak",
}

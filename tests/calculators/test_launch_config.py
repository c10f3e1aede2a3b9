"""The launch configuration of a plan (issue #25 item 6): every generated command parses with a parser built from
the frameworks' own argument names (knowledge/data/launch-args.yaml, each cited), so a made-up flag fails; the
quoting round-trips; the Kubernetes manifest is valid YAML with GPUs per pod = devices per replica."""
from __future__ import annotations

import argparse
import shlex
from types import SimpleNamespace

import pytest
import yaml

from calculators.domain import DEFAULT_MEMORY_UTILIZATION, hardware_spec
from calculators.families.serving.launch_config import COMMAND, FRAMEWORKS, launch_config, launch_for_plan
from knowledge.loader import DATA_DIR, load_yaml

ARGS = {f["framework"]: f for f in load_yaml(DATA_DIR / "launch-args.yaml")}
TYPES = {"int": int, "float": float, "str": str}


class Refused(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):   # argparse exits by default; a test wants the reason
        raise Refused(message)


def parser_for(framework: str) -> argparse.ArgumentParser:
    """An argparse parser of exactly the arguments launch-args.yaml lists (no abbreviations)."""
    spec = ARGS[framework]
    p = _Parser(prog=" ".join(spec["command"]), allow_abbrev=False, add_help=False)
    for name in spec["positional"]:
        p.add_argument(name)
    for a in spec["args"]:
        names = [a["name"], *a.get("aliases", [])]
        if a["type"] == "flag":
            p.add_argument(*names, action="store_true")
        else:
            p.add_argument(*names, type=TYPES[a["type"]], choices=a.get("choices"))
    return p


def parse(out: dict) -> argparse.Namespace:
    argv = out["argv"]
    n = len(COMMAND[out["framework"]])
    assert argv[:n] == ARGS[out["framework"]]["command"]
    return parser_for(out["framework"]).parse_args(argv[n:])


CASES = [
    # framework, tp, pp, ep, dp_attention, kv_format, chunked, quantization
    ("vllm", 4, 1, 1, False, "bf16", None, None),
    ("vllm", 8, 2, 8, False, "fp8", 8192, "fp8"),
    ("vllm", 8, 1, 8, True, "fp8", 4096, None),
    ("sglang", 2, 1, 1, False, "fp8", 8192, "fp8"),
    ("sglang", 8, 1, 8, True, "bf16", None, None),
    ("sglang", 4, 2, 2, False, None, 2048, None),
    ("trtllm", 2, 1, 1, False, "fp8", 8192, None),
    ("trtllm", 8, 1, 8, True, "fp8", None, None),
    ("trtllm", 4, 2, 4, False, "bf16", 4096, None),
]


@pytest.mark.parametrize("fw,tp,pp,ep,dpa,kv,chunked,quant", CASES)
def test_the_command_parses_with_the_frameworks_argument_names(fw, tp, pp, ep, dpa, kv, chunked, quant):
    out = launch_config(fw, "meta-llama/Meta-Llama-3.1-70B", tp, pp, ep, dpa, 3, 64, kv, "bf16", chunked, 0.9, 4096,
                        tp * pp, "NVIDIA", quantization=quant)
    ns = parse(out)
    assert shlex.split(out["command"]) == out["argv"]
    if fw == "vllm":
        assert ns.model == "meta-llama/Meta-Llama-3.1-70B"
        assert (ns.tensor_parallel_size, ns.data_parallel_size or 1) == ((1, tp) if dpa else (tp, 1))
        assert ns.enable_expert_parallel == (ep == tp and ep > 1)
        assert (ns.pipeline_parallel_size or 1) == pp
        assert ns.max_num_seqs == (-(-64 // tp) if dpa else 64)
        assert ns.kv_cache_dtype == ("fp8" if kv == "fp8" else None)
        assert ns.max_num_batched_tokens == chunked and ns.gpu_memory_utilization == 0.9 and ns.max_model_len == 4096
        assert ns.quantization == quant and ns.port == 8000
    elif fw == "sglang":
        assert ns.model_path == "meta-llama/Meta-Llama-3.1-70B" and ns.tp_size == tp and (ns.pp_size or 1) == pp
        assert (ns.ep_size or 1) == (tp if dpa else ep) and ns.enable_dp_attention == dpa
        assert (ns.dp_size or 1) == (tp if dpa else 1)
        assert ns.max_running_requests == 64 and ns.chunked_prefill_size == chunked
        assert ns.kv_cache_dtype == ("fp8_e4m3" if kv == "fp8" else None) and ns.mem_fraction_static == 0.9
        assert ns.context_length == 4096 and ns.port == 30000 and ns.host == "0.0.0.0"
    else:
        assert ns.model == "meta-llama/Meta-Llama-3.1-70B" and ns.backend == "pytorch"
        assert ns.tp_size == tp and (ns.pp_size or 1) == pp and (ns.ep_size or 1) == (tp if dpa else ep)
        assert ns.max_batch_size == 64 and ns.max_num_tokens == chunked and ns.enable_chunked_prefill == bool(chunked)
        assert ns.max_seq_len == 4096 and ns.port == 8000
        extra = yaml.safe_load(out["extra_config_yaml"]) if out["extra_config_yaml"] else {}
        assert extra.get("enable_attention_dp", False) == dpa
        assert (extra.get("kv_cache_config") or {}).get("dtype") == ("fp8" if kv == "fp8" else None)
        assert (ns.extra_llm_api_options is not None) == bool(extra)


def test_a_made_up_or_abbreviated_flag_fails_the_parser():
    for fw in FRAMEWORKS:
        out = launch_config(fw, "Qwen/Qwen3-8B", 1, 1, 1, False, 1, 8, None, None, None, 0.9, 2048, 1, "NVIDIA")
        parse(out)
        n = len(COMMAND[fw])
        with pytest.raises(Refused):
            parser_for(fw).parse_args(out["argv"][n:] + ["--made-up-flag", "1"])
    with pytest.raises(Refused):          # no prefix matching: `--max-num` is not --max-num-seqs
        parser_for("vllm").parse_args(["m", "--max-num", "4"])
    with pytest.raises(Refused):          # a value of the wrong type
        parser_for("sglang").parse_args(["--tp-size", "two"])
    with pytest.raises(Refused):          # a value outside the documented choices
        parser_for("vllm").parse_args(["m", "--kv-cache-dtype", "fp4"])


def test_the_quoting_round_trips_a_path_with_spaces():
    out = launch_config("vllm", "/models/my model's dir", 2, 1, 1, False, 1, 16, None, None, None, 0.85, 1024, 2, "NVIDIA")
    assert shlex.split(out["command"]) == out["argv"] and "'" in out["command"]
    assert parse(out).model == "/models/my model's dir"


@pytest.mark.parametrize("fw", FRAMEWORKS)
@pytest.mark.parametrize("vendor", ["NVIDIA", "AMD"])
def test_the_manifest_is_a_deployment_and_a_service(fw, vendor):
    tp, pp, replicas = 4, 2, 3
    out = launch_config(fw, "meta-llama/Meta-Llama-3.1-70B", tp, pp, 1, False, replicas, 32, "fp8", None, 4096, 0.9,
                        8192, tp * pp, vendor)
    docs = [d for d in yaml.safe_load_all(out["kubernetes_manifest_yaml"]) if d]
    kinds = [d["kind"] for d in docs]
    assert kinds.count("Deployment") == 1 and kinds.count("Service") == 1
    dep = next(d for d in docs if d["kind"] == "Deployment")
    svc = next(d for d in docs if d["kind"] == "Service")
    assert dep["spec"]["replicas"] == replicas
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    gpu = "amd.com/gpu" if vendor == "AMD" else "nvidia.com/gpu"
    assert c["resources"]["limits"] == {gpu: tp * pp}
    assert c["command"] + c["args"] == out["argv"]
    assert c["readinessProbe"]["httpGet"] == {"path": "/health", "port": out["port"]}
    assert c["ports"][0]["containerPort"] == out["port"] == svc["spec"]["ports"][0]["targetPort"]
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"] == dep["spec"]["template"]["metadata"]["labels"]
    shm = next(v for v in pod["volumes"] if v["name"] == "shm")
    assert shm["emptyDir"]["medium"] == "Memory" and {"name": "shm", "mountPath": "/dev/shm"} in c["volumeMounts"]
    repo = {"vllm": "rocm/vllm" if vendor == "AMD" else "vllm/vllm-openai", "sglang": "lmsysorg/sglang",
            "trtllm": "nvcr.io/nvidia/tensorrt-llm/release"}[fw]
    assert c["image"].rsplit(":", 1)[0] == repo
    if fw == "trtllm":
        cm = next(d for d in docs if d["kind"] == "ConfigMap")
        assert yaml.safe_load(next(iter(cm["data"].values()))) == yaml.safe_load(out["extra_config_yaml"])
    if fw == "trtllm" and vendor == "AMD":
        assert any("NVIDIA GPUs only" in n for n in out["notes"])


def test_dp_attention_pods_hold_every_rank():
    out = launch_config("vllm", "deepseek-ai/DeepSeek-V3", 8, 1, 8, True, 2, 256, "fp8", None, None, 0.9, 4096, 8, "NVIDIA")
    ns = parse(out)
    (dep,) = [d for d in yaml.safe_load_all(out["kubernetes_manifest_yaml"]) if d and d["kind"] == "Deployment"]
    gpus = dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
    assert gpus == ns.tensor_parallel_size * ns.data_parallel_size * (ns.pipeline_parallel_size or 1) == 8


def test_a_replica_larger_than_a_node_is_not_a_single_deployment():
    out = launch_config("sglang", "deepseek-ai/DeepSeek-V3", 8, 2, 1, False, 1, 64, None, None, None, 0.9, 4096, 16,
                        "NVIDIA")
    assert out["multi_node"] and out["kubernetes_manifest_yaml"] == ""
    assert any("multi-node launch over 2 nodes" in n for n in out["notes"])
    parse(out)
    small = launch_config("sglang", "Qwen/Qwen3-8B", 8, 1, 1, False, 1, 64, None, None, None, 0.9, 4096, 8, "NVIDIA")
    assert not small["multi_node"] and small["kubernetes_manifest_yaml"]


def test_launch_args_cite_a_stored_source_for_every_name(catalog):
    sources = catalog.by_id("source")
    for fw, spec in ARGS.items():
        assert fw in FRAMEWORKS and spec["version"] and spec["command"] == COMMAND[fw]
        rows = [*spec["args"], *spec.get("extra_options", []), spec["image"], spec["port"], spec["health_path"]]
        for row in rows:
            assert row["source"] in sources and row["locator"], (fw, row)
        names = [n for a in spec["args"] for n in (a["name"], *a.get("aliases", []))]
        assert len(names) == len(set(names)), fw


def test_trtllm_extra_options_are_listed_keys():
    allowed = {a["name"]: a for a in ARGS["trtllm"]["extra_options"]}
    out = launch_config("trtllm", "deepseek-ai/DeepSeek-V3", 8, 1, 8, True, 1, 128, "fp8", None, None, 0.9, 4096, 8,
                        "NVIDIA")
    extra = yaml.safe_load(out["extra_config_yaml"])

    def leaves(d, prefix=""):
        for k, v in d.items():
            yield from (leaves(v, f"{prefix}{k}.") if isinstance(v, dict) else [(f"{prefix}{k}", v)])

    for key, value in leaves(extra):
        assert key in allowed, key
        assert value in allowed[key].get("choices", [value]), (key, value)


def _plan(**kw):
    base = {"hardware": "h100-sxm", "mode": "aggregated", "tp": 4, "pp": 1, "ep": 1, "dp_attention": False, "batch": 64,
            "replicas": 2, "memory_per_device_bytes": {"weights": 35e9, "kv": 20e9, "total": 55e9}}
    return {**base, **kw}


def _req(**kw):
    base = dict(model="llama-3.1-70b", framework="vllm", weight_format=None, kv_format=None, memory_utilization=None,
                input_tokens=2000, output_tokens=500)
    return SimpleNamespace(**{**base, **kw})


def test_launch_for_plan_reads_the_model_repository_and_the_checkpoint_rule(lookup):
    out = launch_for_plan(_plan(), _req(), lookup)
    assert out["model_repository"] == "meta-llama/Meta-Llama-3.1-70B"
    ns = parse(out)
    assert (ns.tensor_parallel_size, ns.max_num_seqs, ns.max_model_len) == (4, 64, 2500) and ns.quantization is None
    assert ns.gpu_memory_utilization == pytest.approx(DEFAULT_MEMORY_UTILIZATION)
    assert launch_for_plan(None, _req(), lookup) is None
    # FP8: the store holds an FP8 checkpoint of the same shape -> its repository, no quantisation flag
    fp8 = launch_for_plan(_plan(), _req(weight_format="fp8"), lookup)
    assert fp8["model_repository"] == "nvidia/Llama-3.1-70B-Instruct-FP8" and parse(fp8).quantization is None
    # NVFP4: none stored -> the BF16 repository, and no flag (none confirmed); said in the notes
    nv = launch_for_plan(_plan(), _req(weight_format="nvfp4"), lookup)
    assert nv["model_repository"] == "meta-llama/Meta-Llama-3.1-70B" and parse(nv).quantization is None
    assert any("no stored nvfp4 checkpoint" in n for n in nv["notes"])
    # FP8 of a model with no stored FP8 checkpoint: vLLM quantises at load with the documented flag
    q = launch_for_plan(_plan(tp=1), _req(model="llama-3.1-8b", weight_format="fp8"), lookup)
    assert q["model_repository"] == "meta-llama/Meta-Llama-3.1-8B" and parse(q).quantization == "fp8"
    # a release that ships mixed MXFP4/BF16 weights is its own MXFP4 checkpoint
    g = launch_for_plan(_plan(tp=1), _req(model="gpt-oss-120b", weight_format="mxfp4"), lookup)
    assert g["model_repository"] == "openai/gpt-oss-120b" and not any("no stored" in n for n in g["notes"])
    t = launch_for_plan(_plan(tp=1), _req(model="llama-3.1-8b", weight_format="fp8", framework="trtllm"), lookup)
    assert "--quantization" not in t["argv"] and any("No trtllm flag" in n for n in t["notes"])


def test_launch_sets_the_token_budget_the_estimate_assumed(lookup):
    from calculators.families.serving._launch_config import ESTIMATE_TOKEN_BUDGET
    from calculators.families.serving.serving_estimate import DEFAULT_TOKEN_BUDGET

    assert ESTIMATE_TOKEN_BUDGET == DEFAULT_TOKEN_BUDGET
    est = {"request": {"hardware": "h100-sxm", "tp": 4}, "tpot_s": 0.02}
    for fw, flag in (("vllm", "max_num_batched_tokens"), ("sglang", "chunked_prefill_size"), ("trtllm", "max_num_tokens")):
        out = launch_for_plan(_plan(serving_estimate=est), _req(framework=fw), lookup)
        assert getattr(parse(out), flag) == DEFAULT_TOKEN_BUDGET, fw
        given = launch_for_plan(_plan(serving_estimate={**est, "request": {"chunked_prefill_tokens": 2048}}),
                                _req(framework=fw), lookup)
        assert getattr(parse(given), flag) == 2048, fw
    # figures from the screen only (no serving-estimate): the engine's own default is left alone
    assert parse(launch_for_plan(_plan(), _req(), lookup)).max_num_batched_tokens is None


def test_launch_for_plan_on_amd_and_disaggregated(lookup):
    amd = launch_for_plan(_plan(hardware="mi300x", tp=8), _req(), lookup)
    (dep,) = [d for d in yaml.safe_load_all(amd["kubernetes_manifest_yaml"]) if d and d["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {"amd.com/gpu": 8}
    dis = launch_for_plan(_plan(mode="disaggregated", replicas=5, decode_pool={"tp": 4, "batch": 64, "replicas": 5, "devices": 20},
                                prefill_pool={"tp": 2, "replicas": 3}), _req(), lookup)
    assert dis["replicas"] == 5 and any("prefill pool" in n for n in dis["notes"])
    # TensorRT-LLM's KV share is of the memory left after the weights: (0.9 x M - W) / (M - W)
    trt = launch_for_plan(_plan(), _req(framework="trtllm"), lookup)
    m, u = hardware_spec(lookup, "h100-sxm", "hardware").memory_bytes, DEFAULT_MEMORY_UTILIZATION
    frac = parse(trt).kv_cache_free_gpu_memory_fraction
    assert frac == pytest.approx((u * m - 35e9) / (m - 35e9), abs=1e-4) and frac < u

"""The launch configuration of a deployment plan: the serving command and a Kubernetes manifest to run it
(imported by the planner as `calculators.families.serving._launch_config`; `launch_config` is its public name).

`launch_config(...)` turns one configuration (framework, model repository, TP/PP/EP, DP attention, replicas, batch
slots, KV and weight formats, chunked prefill, memory fraction, context) into
- `argv` / `command`: `vllm serve`, `python3 -m sglang.launch_server` or `trtllm-serve`, with only the argument names
  the frameworks define (knowledge/data/launch-args.yaml lists each with its source; the tests parse every command
  with a parser built from that file, so an undocumented flag fails them);
- `extra_config_yaml`: TensorRT-LLM's extra LLM API options file where a setting has no trtllm-serve flag (KV cache
  dtype, attention data parallelism);
- `kubernetes_manifest_yaml`: a Deployment (one pod per model replica, GPUs per pod = devices per replica) and a
  Service, or "" when one replica spans more than a node (a multi-node launch is needed; said in `notes`).
`launch_for_plan(plan, req, lookup, res)` reads what that needs from a deployment-plan's `best` and its request.

Pure: no I/O, no clock. What a flag cannot express is left out and said in `notes`, never guessed.
"""
from __future__ import annotations

import math
import shlex
from typing import Any

from calculators.domain import DEFAULT_MEMORY_UTILIZATION, hardware_spec, record
from calculators.framework import CalcInputError, ids_of, Lookup, Result

FRAMEWORKS = ("vllm", "sglang", "trtllm")
#: the command each framework starts with (launch-args.yaml `command`)
COMMAND = {"vllm": ["vllm", "serve"], "sglang": ["python3", "-m", "sglang.launch_server"], "trtllm": ["trtllm-serve"]}
#: public container image repositories (launch-args.yaml `image`; sources-launch.yaml)
IMAGE = {"vllm": "vllm/vllm-openai", "sglang": "lmsysorg/sglang", "trtllm": "nvcr.io/nvidia/tensorrt-llm/release"}
#: vLLM's ROCm image as its Kubernetes guide names it (the only tag we have read is the guide's example)
VLLM_ROCM_IMAGE = "rocm/vllm:rocm6.2_mi300_ubuntu20.04_py3.9_vllm_0.6.4"
PORT = {"vllm": 8000, "sglang": 30000, "trtllm": 8000}
HEALTH_PATH = "/health"
#: the KV cache value each framework takes for an FP8 cache (vLLM fp8 = e4m3; SGLang names the variant)
KV_FP8 = {"vllm": "fp8", "sglang": "fp8_e4m3", "trtllm": "fp8"}
FP8_KV_FORMATS = ("fp8", "fp8_per_tensor", "mxfp8")
WIDE_FORMATS = ("bf16", "fp16", "fp32")
#: the plan states no node size: HGX/DGX H100, H200, B200 and MI300X platforms hold 8 GPUs
DEVICES_PER_NODE = 8
#: where the manifest mounts TensorRT-LLM's extra options file (and where the command expects it)
TRTLLM_EXTRA_PATH = "/etc/trtllm/extra_llm_api_options.yaml"
#: the token budget of one step serving-estimate assumes when a body names none (its DEFAULT_TOKEN_BUDGET; a family
#: module may not import another's public module, so the test checks the two agree): the planner's re-estimated
#: figures assume it, so the launch sets it explicitly
ESTIMATE_TOKEN_BUDGET = 8192
#: the versions the measured kernel tables were collected with (knowledge/data/measured/manifest.yaml), the image
#: tags used when a plan names none
DEFAULT_VERSION = {"vllm": "0.24.0", "sglang": "0.5.14", "trtllm": "1.3.0rc20"}


def _image(framework: str, version: str | None, vendor: str | None, notes: list[str]) -> str:
    amd = (vendor or "").lower() == "amd"
    v = version or DEFAULT_VERSION[framework]
    if framework == "vllm" and amd:
        notes.append(f"AMD GPU: the image is {VLLM_ROCM_IMAGE}, the ROCm build vLLM's Kubernetes guide uses; that tag is "
                     f"vLLM 0.6.4, older than the engine arguments used here (pick a current rocm/vllm tag).")
        return VLLM_ROCM_IMAGE
    if framework == "sglang" and amd:
        notes.append("AMD GPU: lmsysorg/sglang publishes ROCm builds under their own tags (e.g. v0.5.11-rocm700-mi35x); "
                     "the tag here is the CUDA build's: replace it with the ROCm build of the same release.")
    if framework == "trtllm" and amd:
        notes.append("TensorRT-LLM runs on NVIDIA GPUs only: this launch cannot run on AMD hardware; choose vllm or sglang.")
    tag = v if framework == "trtllm" else f"v{v}"
    if framework != "trtllm":
        notes.append(f"Image tag {tag}: {IMAGE[framework]}'s v-prefixed release tags, as public manifests pin them (e.g. "
                     f"{IMAGE[framework]}:{'v0.11.0' if framework == 'vllm' else 'v0.5.12'}); the framework's own "
                     "documentation read here shows only :latest. Check that the tag exists before deploying.")
    return f"{IMAGE[framework]}:{tag}"


def _kv_value(framework: str, kv_format: str | None, notes: list[str]) -> str | None:
    """The framework's KV cache dtype value for the plan's KV format (None = the framework's default, the model's)."""
    if kv_format is None or kv_format in WIDE_FORMATS:
        return None
    if kv_format in FP8_KV_FORMATS:
        return KV_FP8[framework]
    notes.append(f"KV format {kv_format}: no {framework} KV cache dtype for it is confirmed by the sources read; the "
                 "command keeps the default (the model's dtype), which holds fewer sequences than the plan assumed.")
    return None


def _argv(framework: str, model_repo: str, tp: int, pp: int, ep: int, dp_attention: bool, max_num_seqs: int | None,
          kv: str | None, quantization: str | None, chunked: int | None, fraction: float | None,
          max_model_len: int | None, notes: list[str]) -> tuple[list[str], dict | None]:
    """argv and (TensorRT-LLM) the extra LLM API options."""
    a = list(COMMAND[framework])
    extra: dict[str, Any] = {}
    if framework == "vllm":
        a.append(model_repo)
        if dp_attention:
            # vLLM runs DP attention as data-parallel ranks with the experts spread over all of them
            a += ["--tensor-parallel-size", "1", "--data-parallel-size", str(tp), "--enable-expert-parallel"]
            notes.append(f"DP attention: vLLM runs it as {tp} data-parallel ranks of TP 1 with --enable-expert-parallel "
                         f"(experts over all {tp} ranks, ep = {tp}).")
        else:
            a += ["--tensor-parallel-size", str(tp)]
            if ep > 1 and ep == tp:
                a.append("--enable-expert-parallel")
            elif ep > 1:
                notes.append(f"EP {ep} < TP {tp}: vLLM's expert parallelism spans the whole TP group (ep = tp); the "
                             "plan's partial EP has no flag, so the experts stay tensor-parallel.")
        if pp > 1:
            a += ["--pipeline-parallel-size", str(pp)]
        if max_num_seqs:
            a += ["--max-num-seqs", str(_per_rank(max_num_seqs, tp if dp_attention else 1))]
        if kv:
            a += ["--kv-cache-dtype", kv]
        if quantization:
            a += ["--quantization", quantization]
        if chunked:
            a += ["--max-num-batched-tokens", str(chunked)]
        if fraction is not None:
            a += ["--gpu-memory-utilization", _frac(fraction)]
        if max_model_len:
            a += ["--max-model-len", str(max_model_len)]
        a += ["--port", str(PORT[framework])]
    elif framework == "sglang":
        a += ["--model-path", model_repo, "--tp-size", str(tp)]
        if pp > 1:
            a += ["--pp-size", str(pp)]
        if dp_attention:
            a += ["--ep-size", str(tp), "--enable-dp-attention", "--dp-size", str(tp)]
            notes.append("DP attention: SGLang wants dp size = tp size; whether --max-running-requests then counts per DP "
                         "rank or per server is not settled by the sources read (it is set to the replica's total).")
        elif ep > 1:
            a += ["--ep-size", str(ep)]
        if max_num_seqs:
            a += ["--max-running-requests", str(max_num_seqs)]
        if kv:
            a += ["--kv-cache-dtype", kv]
        if quantization:
            a += ["--quantization", quantization]
        if chunked:
            a += ["--chunked-prefill-size", str(chunked)]
        if fraction is not None:
            a += ["--mem-fraction-static", _frac(fraction)]
        if max_model_len:
            a += ["--context-length", str(max_model_len)]
        a += ["--host", "0.0.0.0", "--port", str(PORT[framework])]
    else:
        a += [model_repo, "--backend", "pytorch", "--tp_size", str(tp)]
        if pp > 1:
            a += ["--pp_size", str(pp)]
        if dp_attention:
            a += ["--ep_size", str(tp)]
            extra["enable_attention_dp"] = True
            notes.append("DP attention: enable_attention_dp in the extra options file, experts over all tp ranks (--ep_size "
                         f"{tp}); whether --max_batch_size then counts per rank or per server is not settled by the sources "
                         "read (it is set to the replica's total).")
        elif ep > 1:
            a += ["--ep_size", str(ep)]
        if max_num_seqs:
            a += ["--max_batch_size", str(max_num_seqs)]
        if chunked:
            a += ["--max_num_tokens", str(chunked), "--enable_chunked_prefill"]
        if fraction is not None:
            a += ["--kv_cache_free_gpu_memory_fraction", _frac(fraction)]
        if max_model_len:
            a += ["--max_seq_len", str(max_model_len)]
        if kv:
            extra["kv_cache_config"] = {"dtype": kv}
        if quantization:
            notes.append("TensorRT-LLM serves quantised checkpoints as published (ModelOpt); trtllm-serve has no flag that "
                         "quantises a 16-bit checkpoint, so this command runs the repository's own format.")
        a += ["--host", "0.0.0.0", "--port", str(PORT[framework])]
        if extra:
            a += ["--extra_llm_api_options", TRTLLM_EXTRA_PATH]
    return a, (extra or None)


def _per_rank(total: int, ranks: int) -> int:
    return max(1, math.ceil(total / max(1, ranks)))


def _frac(x: float) -> str:
    return f"{round(float(x), 4):g}"


def _name(model_repo: str, framework: str) -> str:
    """A DNS-1035 label for the Deployment and Service: lower case, digits and '-', at most 63 characters."""
    base = "".join(c if c.isalnum() else "-" for c in model_repo.split("/")[-1].lower())
    base = "-".join(p for p in base.split("-") if p)
    name = f"{framework}-{base}"[:63].rstrip("-")
    return name if name[0].isalpha() else f"m-{name}"[:63]


def _manifest(framework: str, model_repo: str, argv: list[str], image: str, replicas: int, devices: int,
              vendor: str | None, extra_yaml: str | None) -> str:
    """Deployment (+ ConfigMap for TensorRT-LLM's options file) and Service, as YAML documents."""
    import yaml

    name = _name(model_repo, framework)
    port = PORT[framework]
    gpu_key = "amd.com/gpu" if (vendor or "").lower() == "amd" else "nvidia.com/gpu"
    n_cmd = len(COMMAND[framework])
    mounts = [{"name": "shm", "mountPath": "/dev/shm"}, {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"}]
    volumes: list[dict] = [{"name": "shm", "emptyDir": {"medium": "Memory"}}, {"name": "hf-cache", "emptyDir": {}}]
    docs: list[dict] = []
    if extra_yaml:
        cm = f"{name}-extra-options"
        docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": cm, "labels": {"app": name}},
                     "data": {TRTLLM_EXTRA_PATH.rsplit("/", 1)[1]: extra_yaml}})
        mounts.append({"name": "extra-options", "mountPath": TRTLLM_EXTRA_PATH.rsplit("/", 1)[0], "readOnly": True})
        volumes.append({"name": "extra-options", "configMap": {"name": cm}})
    probe = {"httpGet": {"path": HEALTH_PATH, "port": port}, "initialDelaySeconds": 60, "periodSeconds": 10,
             "failureThreshold": 60}
    container = {
        "name": framework, "image": image, "command": argv[:n_cmd], "args": argv[n_cmd:],
        "ports": [{"name": "http", "containerPort": port}],
        "env": [{"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token-secret", "key": "token",
                                                                    "optional": True}}}],
        "resources": {"limits": {gpu_key: devices}, "requests": {gpu_key: devices}},
        "volumeMounts": mounts, "readinessProbe": probe,
    }
    docs.append({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [container], "volumes": volumes}}}})
    docs.append({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "labels": {"app": name}},
                 "spec": {"selector": {"app": name}, "type": "ClusterIP",
                          "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]}})
    return yaml.safe_dump_all(docs, sort_keys=False, default_flow_style=False, width=4096)


def launch_config(framework: str, model_repo: str, tp: int, pp: int = 1, ep: int = 1, dp_attention: bool = False,
                  replicas: int = 1, max_num_seqs: int | None = None, kv_format: str | None = None,
                  weight_format: str | None = None, chunked_prefill_tokens: int | None = None,
                  gpu_memory_fraction: float | None = None, max_model_len: int | None = None,
                  devices_per_replica: int | None = None, hardware_vendor: str | None = None, *,
                  quantization: str | None = None, framework_version: str | None = None,
                  devices_per_node: int = DEVICES_PER_NODE, weight_bytes_per_device: float | None = None,
                  device_memory_bytes: float | None = None, notes: list[str] | None = None) -> dict:
    """The launch of one configuration: {framework, argv, command, env, extra_config_yaml, kubernetes_manifest_yaml,
    image, port, health_path, devices_per_replica, replicas, multi_node, notes}.

    `gpu_memory_fraction` is the share of each device's memory the plan lets weights + KV use (vLLM
    --gpu-memory-utilization and SGLang --mem-fraction-static mean that share); TensorRT-LLM's
    --kv_cache_free_gpu_memory_fraction is a share of the memory left after the weights, converted when
    `weight_bytes_per_device` and `device_memory_bytes` are given. `quantization`: a weight-quantisation value to pass
    (only "fp8", for a 16-bit checkpoint; see `launch_for_plan`). `weight_format` is recorded in the notes."""
    if framework not in FRAMEWORKS:
        raise ValueError(f"framework must be one of {', '.join(FRAMEWORKS)}")
    notes = list(notes or [])
    tp, pp, ep = int(tp), int(pp), int(ep)
    devices = int(devices_per_replica or tp * pp)
    kv = _kv_value(framework, kv_format, notes)
    fraction = gpu_memory_fraction
    if framework == "trtllm" and fraction is not None:
        if weight_bytes_per_device is not None and device_memory_bytes:
            free = device_memory_bytes - weight_bytes_per_device
            fraction = max(0.01, min(0.99, (fraction * device_memory_bytes - weight_bytes_per_device) / free)) if free > 0 else None
            if fraction is not None:
                notes.append(f"--kv_cache_free_gpu_memory_fraction {_frac(fraction)}: the plan's {_frac(gpu_memory_fraction)} "
                             "of device memory for weights + KV, re-expressed as a share of the memory left after the weights.")
        else:
            notes.append("--kv_cache_free_gpu_memory_fraction is a share of the memory left after the weights; the plan's "
                         "share of the whole memory is passed unconverted (weights per device not given).")
    if weight_format and weight_format not in WIDE_FORMATS and not quantization:
        notes.append(f"Weights: {weight_format} as published in {model_repo} (the framework reads the checkpoint's format).")
    argv, extra = _argv(framework, model_repo, tp, pp, ep, dp_attention, max_num_seqs, kv, quantization,
                        chunked_prefill_tokens, fraction, max_model_len, notes)
    if pp > 1:
        notes.append(f"PP {pp}: the plan holds {max_num_seqs} sequences per pipeline stage; the framework's sequence limit "
                     "is set to that per-stage figure.")
    import yaml

    extra_yaml = yaml.safe_dump(extra, sort_keys=False) if extra else None
    image = _image(framework, framework_version, hardware_vendor, notes)
    multi = devices > devices_per_node
    if multi:
        nodes = math.ceil(devices / devices_per_node)
        how = {"vllm": "Ray or LeaderWorkerSet (vLLM's Kubernetes options include kubernetes-sigs/lws)",
               "sglang": "--nnodes / --node-rank / --dist-init-addr on each node (e.g. a StatefulSet or LeaderWorkerSet)",
               "trtllm": "an MPI or Slurm launch across the nodes"}[framework]
        notes.append(f"One replica needs {devices} devices, more than one {devices_per_node}-device node holds: a multi-node launch "
                     f"over {nodes} nodes is needed ({how}). No single-pod Deployment is given: a pod cannot span nodes.")
        manifest = ""
    else:
        manifest = _manifest(framework, model_repo, argv, image, int(replicas), devices, hardware_vendor, extra_yaml)
    if framework == "trtllm" and extra_yaml:
        notes.append(f"Write extra_config_yaml to {TRTLLM_EXTRA_PATH} (the manifest mounts it there from a ConfigMap).")
    return {"framework": framework, "argv": argv, "command": shlex.join(argv), "env": {},
            "extra_config_yaml": extra_yaml, "kubernetes_manifest_yaml": manifest, "image": image,
            "port": PORT[framework], "health_path": HEALTH_PATH, "devices_per_replica": devices,
            "replicas": int(replicas), "multi_node": multi, "model_repository": model_repo, "notes": notes}


# --------------------------------------------------------------------------- from a plan

_SHAPE = ("layers", "hidden_size", "heads", "kv_heads", "ffn_size", "vocab_size")


def _repository(rec) -> str | None:
    prov = dict.get(rec, "config_provenance")
    return prov.get("repository") if isinstance(prov, dict) else None


def _shape(rec) -> tuple:
    moe = rec.moe or {}
    experts = moe.get("experts")
    return (tuple(rec.value(f, required=False) for f in _SHAPE),
            experts.get("value") if isinstance(experts, dict) else experts)


def checkpoint_for(lookup: Lookup, rec, weight_format: str | None) -> tuple[str | None, str | None, str]:
    """(repository, record id, how it was chosen) of the checkpoint that serves `rec` in `weight_format`.

    The rule: the model's own repository when no format is asked or the model ships in it; else a stored record of
    the same family and shape (layers, hidden, heads, KV heads, FFN, vocabulary, experts) whose weights ship in that
    format, the first by id; else none (the caller keeps the model's repository and says so)."""
    own = _repository(rec)
    shipped = rec.weight_dtype if isinstance(rec.weight_dtype, str) else None
    if not weight_format or not isinstance(weight_format, str) or weight_format == shipped \
            or (shipped and weight_format in shipped.split("-")):   # e.g. mxfp4 of a mixed-mxfp4-bf16 release
        return own, rec.id, f"{rec.id}'s own repository ({shipped or 'published format'})"
    family, shape = dict.get(rec, "family"), _shape(rec)
    for mid in sorted(ids_of(lookup, "model")):
        if mid == rec.id:
            continue
        try:
            other = record(lookup, "model", mid, "model")
        except CalcInputError:
            continue
        if other.weight_dtype == weight_format and dict.get(other, "family") == family and _shape(other) == shape \
                and _repository(other):
            return _repository(other), other.id, (f"the stored {weight_format} checkpoint of the same shape ({other.id}); "
                                                  "it may be a different fine-tune (e.g. Instruct) of the same architecture")
    return None, None, f"no stored {weight_format} checkpoint of {rec.id}'s shape"


def launch_for_plan(plan: dict, req, lookup: Lookup, res: Result | None = None) -> dict | None:
    """The launch configuration of a deployment plan's `best` configuration (None when there is none).

    Reads the model record's repository (`config_provenance.repository`), the checkpoint for the plan's weight format
    (`checkpoint_for`), the hardware's vendor, and the request's framework, KV format, memory fraction, context
    (input + output tokens, capped by the model's) and chunked-prefill size when it has one. Disaggregated plans get
    the decode pool's launch; the prefill pool and the KV connector between them are not generated (said in notes)."""
    if not plan:
        return None
    notes: list[str] = []
    framework = getattr(req, "framework", None) or "vllm"
    model_id = getattr(req, "model", None)
    rec = record(lookup, "model", model_id, "model") if model_id else None
    repo = _repository(rec) if rec is not None else None
    weight_format = getattr(req, "weight_format", None)
    wf = weight_format if isinstance(weight_format, str) else None
    quantization = None
    if rec is not None:
        chosen, _, why = checkpoint_for(lookup, rec, wf)
        if chosen:
            repo = chosen
            notes.append(f"Model repository {repo}: {why}.")
        else:
            notes.append(f"Weights {wf}: {why}; the command keeps {repo}.")
            if wf in ("fp8",) and framework in ("vllm", "sglang"):
                quantization = "fp8"
                notes.append("--quantization fp8 quantises the 16-bit weights to FP8 at load (documented for vLLM and SGLang).")
            else:
                notes.append(f"No {framework} flag confirmed by the sources read quantises to {wf} at load: the "
                             "server runs the repository's own format, not the plan's.")
    if not repo:
        repo = "<model repository>"
        notes.append("The model has no stored repository (a model_config request, or a record without "
                     "config_provenance): replace <model repository> with the Hugging Face name or a local path.")
    hw_rec = record(lookup, "hardware", plan["hardware"], "hardware")
    vendor = dict.get(hw_rec, "vendor")
    hw = hardware_spec(lookup, plan["hardware"], "hardware")
    frac = getattr(req, "memory_utilization", None)
    frac = DEFAULT_MEMORY_UTILIZATION if frac is None else frac
    ctx = None
    if getattr(req, "input_tokens", None) and getattr(req, "output_tokens", None):
        ctx = int(req.input_tokens + req.output_tokens)
        limit = rec.value("context_length", required=False) if rec is not None else None
        if limit and ctx > limit:
            notes.append(f"Context {ctx} tokens exceeds the model's {int(limit)}: capped.")
            ctx = int(limit)
    tp, pp, ep, batch, replicas = plan["tp"], plan.get("pp") or 1, plan.get("ep") or 1, plan.get("batch"), plan.get("replicas")
    if plan.get("mode") == "disaggregated":
        pool = plan.get("decode_pool") or {}
        replicas = pool.get("replicas") or replicas
        notes.append("Disaggregated plan: this is the decode pool's launch; the prefill pool "
                     f"({(plan.get('prefill_pool') or {}).get('replicas')} replicas of TP "
                     f"{(plan.get('prefill_pool') or {}).get('tp')}) needs its own launch and a KV connector between the "
                     "pools, which are not generated.")
    chunked = getattr(req, "chunked_prefill_tokens", None)
    est = plan.get("serving_estimate") if isinstance(plan.get("serving_estimate"), dict) else None
    if chunked is None and est is not None:
        chunked = (est.get("request") or {}).get("chunked_prefill_tokens") or ESTIMATE_TOKEN_BUDGET
        notes.append(f"Token budget per step {chunked}: the one serving-estimate assumed for this plan's TTFT and TPOT "
                     "(set explicitly so the engine runs what was estimated).")
    mem = plan.get("memory_per_device_bytes") or {}
    out = launch_config(framework, repo, tp, pp, ep, bool(plan.get("dp_attention")), int(replicas or 1), batch,
                        getattr(req, "kv_format", None) if isinstance(getattr(req, "kv_format", None), str) else None,
                        wf, chunked, frac, ctx, tp * pp, vendor,
                        quantization=quantization, weight_bytes_per_device=mem.get("weights"),
                        device_memory_bytes=hw.memory_bytes, notes=notes)
    if res is not None:
        res.assume(f"Launch: {out['command']} ({out['replicas']} × {out['devices_per_replica']} {plan['hardware']}); the "
                   "argument names are the frameworks' own (knowledge/data/launch-args.yaml cites each).")
    return out

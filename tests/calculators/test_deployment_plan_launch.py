"""The planner's best plan carries its launch configuration (issue #25 item 6): the command line of the request's
framework with the plan's parallelism and batch, parsed with the frameworks' own argument names, and a Kubernetes
manifest with the plan's replicas and devices per replica."""
from __future__ import annotations

import shlex

import pytest
import yaml

from calculators.framework.runner import compute
from knowledge.loader import catalog_lookup, default_catalog
from tests.calculators.test_launch_config import parse

LOOKUP = catalog_lookup(default_catalog())
BODY = {"model": "llama-3.1-70b", "hardware": ["h100-sxm", "h200-sxm"], "arrival_rate_per_s": 10,
        "input_tokens": 2000, "output_tokens": 500, "ttft_s": 2.0, "tpot_s": 0.05}
TP_FLAG = {"vllm": "tensor_parallel_size", "sglang": "tp_size", "trtllm": "tp_size"}
BATCH_FLAG = {"vllm": "max_num_seqs", "sglang": "max_running_requests", "trtllm": "max_batch_size"}


@pytest.mark.parametrize("framework", ["vllm", "sglang", "trtllm"])
def test_best_plan_launches_with_its_own_parallelism_batch_and_replicas(framework):
    res = compute("deployment-plan", {**BODY, "framework": framework}, LOOKUP)[2]
    best = res.outputs["best"]
    launch = best["launch"]
    assert launch["framework"] == framework
    assert shlex.split(launch["command"]) == launch["argv"]
    args = parse(launch)                         # unknown flags fail here
    assert int(getattr(args, TP_FLAG[framework])) == best["tp"]
    assert int(getattr(args, BATCH_FLAG[framework])) == best["batch"]
    docs = [d for d in yaml.safe_load_all(launch["kubernetes_manifest_yaml"]) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == best["replicas"]
    limits = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert int(limits["nvidia.com/gpu"]) == best["tp"] * best["pp"] == launch["devices_per_replica"]
    assert any(a.startswith("Launch: ") for a in res.assumptions)
    # only the best carries a launch
    assert all(c.get("launch") is None for c in res.outputs["candidates"] if c is not best and c != best)

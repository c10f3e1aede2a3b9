"""The planner page's launch block (issue #25 item 6): the best plan's serving command, TensorRT-LLM's extra options
and the Kubernetes manifest as text and as download links whose data: URLs decode to exactly the answer's text."""
from __future__ import annotations

import re
from html import unescape
from urllib.parse import unquote

import yaml

from api.site import planner
from api.urls import urls
from calculators.families.serving.launch_config import launch_config
from calculators.framework.registry import REGISTRY

NAME = "deployment-plan"


def _decoded(href: str) -> str:
    head, _, body = href.partition(",")
    assert head.startswith("data:") and head.endswith(";charset=utf-8")
    return unquote(body)


def test_launch_view_downloads_decode_to_the_answer():
    out = launch_config("trtllm", "deepseek-ai/DeepSeek-V3", 8, 1, 8, True, 2, 128, "fp8", None, 8192, 0.9, 4096, 8,
                        "NVIDIA")
    v = planner.launch_view(out)
    files = {f["name"]: _decoded(f["href"]) for f in v["files"]}
    assert files["launch-trtllm.sh"].splitlines()[-1] == out["command"]
    assert files["extra_llm_api_options.yaml"] == out["extra_config_yaml"]
    assert files["trtllm-deployment.yaml"] == out["kubernetes_manifest_yaml"]
    assert [d["kind"] for d in yaml.safe_load_all(files["trtllm-deployment.yaml"]) if d] == ["ConfigMap", "Deployment", "Service"]
    # a replica beyond a node: no manifest to download, the notes say why
    big = planner.launch_view(launch_config("vllm", "x/y", 16, 1, 1, False, 1, 8, None, None, None, 0.9, 1024, 16, "NVIDIA"))
    assert [f["name"] for f in big["files"]] == ["launch-vllm.sh"] and big["multi_node"]
    assert planner.launch_view(None) is None and planner.launch_view({}) is None


def test_the_planner_page_shows_the_launch_of_the_best_plan(client):
    # a small search (one GPU, two TP degrees, two batch sizes) keeps the test cheap; the launch is of its best plan
    body = {**REGISTRY[NAME].example, "hardware": ["h100-sxm"], "tp": [4, 8], "batch": [32, 64], "mode": "aggregated"}
    r = client.post(urls.api_item("calculator", NAME), json=body)
    assert r.status_code == 200, r.text[:300]
    outputs = r.json()["outputs"]
    launch = outputs.get("launch") or (outputs.get("best") or {}).get("launch")
    assert launch and launch["command"], "deployment-plan answers no launch for its example"
    html = client.get(urls.calculator_view(NAME, body)).text
    block = re.search(r'<section class="launch" id="launch".*?</section>', html, re.DOTALL)
    assert block, "no launch block on the planner page"
    text = block.group(0)
    cmd = re.search(r'<pre class="launch-command"><code>(.*?)</code></pre>', text, re.DOTALL)
    assert cmd and unescape(cmd.group(1)) == launch["command"]
    hrefs = {unescape(n): unescape(h) for h, n in re.findall(r'<a class="download" href="([^"]+)" download="([^"]+)"', text)}
    assert _decoded(hrefs[f"launch-{launch['framework']}.sh"]).splitlines()[-1] == launch["command"]
    if launch.get("kubernetes_manifest_yaml"):
        assert _decoded(hrefs[f"{launch['framework']}-deployment.yaml"]) == launch["kubernetes_manifest_yaml"]
    assert 'href="#launch"' in html
    # the generic result table does not dump the launch dict a second time
    assert 'data-path="launch.command"' not in html and 'data-path="best.launch.' not in html
    assert 'data-path="best.cost_per_mtok_usd"' in html          # the rest of best is still listed

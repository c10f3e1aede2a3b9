"""A Python client generated from /openapi.json works against the app served by uvicorn."""
from __future__ import annotations

import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from openapi_spec_validator import validate

BIN = Path(sys.executable).parent


def test_openapi_document_is_valid_3_1(live_server):
    spec = httpx.get(live_server + "/openapi.json").json()
    assert spec["openapi"].startswith("3.1")
    validate(spec)


@pytest.fixture(scope="module")
def generated(live_server, tmp_path_factory):
    tool = BIN / "openapi-python-client"
    assert tool.exists(), "openapi-python-client is a test dependency: pip install -e '.[test]' (make test does)"
    out = tmp_path_factory.mktemp("client") / "casebook_client"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # it runs ruff
    proc = subprocess.run([str(tool), "generate", "--url", live_server + "/openapi.json", "--meta", "none",
                           "--output-path", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sys.path.insert(0, str(out.parent))
    try:
        yield importlib.import_module("casebook_client")
    finally:
        sys.path.remove(str(out.parent))
        for name in [m for m in sys.modules if m.startswith("casebook_client")]:
            del sys.modules[name]
        shutil.rmtree(out, ignore_errors=True)


def test_generated_client_calls_list_get_and_a_calculator(generated, live_server):
    client_mod = importlib.import_module("casebook_client.client")
    client = client_mod.Client(base_url=live_server, raise_on_unexpected_status=True)
    list_models = importlib.import_module("casebook_client.api.facts.list_models")
    page = list_models.sync(client=client, family="qwen", limit=5)
    assert page.total >= 6 and len(page.items) == 5
    get_model = importlib.import_module("casebook_client.api.facts.get_model")
    model = get_model.sync(client=client, model_id="qwen3-8b")
    assert model.name == "Qwen3-8B" and model.layers.value == 36 and model.layers.source
    kv_cache = importlib.import_module("casebook_client.api.calculators.kv_cache")
    models = importlib.import_module("casebook_client.models")
    body = models.KVCacheRequest.from_dict({"model": "qwen3-8b", "tokens": 8192})
    env = kv_cache.sync(client=client, body=body)
    assert env.calculator == "kv-cache"
    assert env.outputs.bytes_per_token == 147456          # typed outputs (KVCacheOutputs), not a dict
    assert env.steps and env.steps[0].formula


def test_generated_client_types_errors_as_problems(generated, live_server):
    """A 422 and a 404 come back parsed as the Problem model (not None), with their field errors and suggestions."""
    client = importlib.import_module("casebook_client.client").Client(base_url=live_server)
    models = importlib.import_module("casebook_client.models")
    kv_cache = importlib.import_module("casebook_client.api.calculators.kv_cache")
    bad = models.KVCacheRequest.from_dict({"model": "qwen3-8", "tokens": 8})
    res = kv_cache.sync_detailed(client=client, body=bad)
    assert res.status_code == 422
    assert isinstance(res.parsed, models.Problem), res.parsed
    err = res.parsed.errors[0]
    assert isinstance(err, models.FieldError) and err.field == "model" and "qwen3-8b" in err.suggestions
    get_hardware = importlib.import_module("casebook_client.api.facts.get_hardware")
    res = get_hardware.sync_detailed(client=client, hardware_id="h100")
    assert res.status_code == 404
    assert isinstance(res.parsed, models.Problem) and "h100-sxm" in res.parsed.suggestions
    assert get_hardware.sync(client=client, hardware_id="h100").status == 404   # sync gives the Problem too


def test_generated_names_read_as_english(generated):
    """Choice lists and free-form maps are named schemas, not `KVCacheRequestKvFormatType0`."""
    models = importlib.import_module("casebook_client.models")
    names = [n for n in dir(models) if n[:1].isupper()]
    assert not [n for n in names if re.search(r"Type\d+$", n)], [n for n in names if re.search(r"Type\d+$", n)]
    assert {"FormatName", "Operation", "Problem", "FieldError", "ModelConfig"} <= set(names)
    assert models.FormatName("fp8") == models.FormatName.FP8
    kv = models.KVCacheRequest.from_dict({"model": "qwen3-8b", "tokens": 8, "kv_format": "fp8"})
    assert kv.kv_format == models.FormatName.FP8


def test_generated_client_reads_typed_outputs(generated, live_server):
    client = importlib.import_module("casebook_client.client").Client(base_url=live_server)
    models = importlib.import_module("casebook_client.models")
    edge = importlib.import_module("casebook_client.api.calculators.edge_transfer")
    from calculators.framework.registry import REGISTRY

    env = edge.sync(client=client, body=models.EdgeTransferRequest.from_dict(REGISTRY["edge-transfer"].example))
    assert isinstance(env, models.EdgeTransferEnvelope)
    assert isinstance(env.outputs, models.EdgeTransferOutputs)

"""The measured tables over JSON: the manifest with provenance, filtered rows, problem+json errors."""
from __future__ import annotations

import pytest

from knowledge import measurements as M


def is_problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()


def test_manifest_list_has_provenance(client):
    body = client.get("/api/v1/measurements").json()
    assert body["package"] == "aiconfigurator-core" and body["license"] == "Apache-2.0"
    assert body["total"] == len(M.load_manifest()["files"]) == len(body["items"])
    f = body["items"][0]
    assert {"path", "system", "table", "framework", "version", "path_in_wheel", "sha256", "gpu", "rows", "table_url"} <= set(f)
    assert "elements" in body["units"]["message_size"] and "ms" in body["units"]["latency"]
    only = client.get("/api/v1/measurements", params={"system": "L40S", "table": "nccl"}).json()
    assert [i["path"] for i in only["items"]] == ["l40s/comm/nccl/2.27.3/nccl_perf.parquet"]


def test_rows_filter_and_page(client):
    params = {"system": "h100_sxm", "op_name": "all_reduce", "nccl_dtype": "half", "num_gpus": 8, "limit": 5}
    body = client.get("/api/v1/measurements/nccl", params=params).json()
    assert body["total"] == 21 and len(body["items"]) == 5 and "offset=5" in body["next"]
    row = body["items"][0]
    assert row["system"] == "h100_sxm" and row["num_gpus"] == 8 and row["device"] == "NVIDIA H100 80GB HBM3"
    assert row["latency_s"] == pytest.approx(row["latency"] / 1000)
    assert row["message_bytes"] == 2 * row["message_size"]
    second = client.get("/api/v1/measurements/nccl", params={**params, "offset": 5}).json()
    assert second["items"][0]["message_size"] > body["items"][-1]["message_size"]
    assert client.get("/api/v1/measurements/nccl", params={"framework": "nccl", "limit": 1}).json()["total"] == \
        sum(f["rows"] for f in M.load_manifest()["files"] if f["table"] == "nccl")
    gemm = client.get("/api/v1/measurements/gemm", params={"system": "b200_sxm", "m": 4096, "limit": 3}).json()
    assert gemm["total"] > 0 and all(r["m"] == 4096 and "message_bytes" not in r for r in gemm["items"])


def test_unknown_table_is_404_naming_the_list(client):
    body = is_problem(client.get("/api/v1/measurements/nope"), 404)
    assert body["see"] == "/api/v1/measurements"


@pytest.mark.parametrize("url, params, field", [
    ("/api/v1/measurements/gemm", {"num_gpus": 8}, "num_gpus"),
    ("/api/v1/measurements/nccl", {"limit": 0}, "limit"),
    ("/api/v1/measurements/nccl", {"num_gpus": "eight"}, "num_gpus"),
    ("/api/v1/measurements", {"offset": -1}, "offset"),
])
def test_bad_queries_are_422_naming_the_field(client, url, params, field):
    body = is_problem(client.get(url, params=params), 422)
    assert [e["field"] for e in body["errors"]] == [field]


def test_operation_ids(client):
    spec = client.get("/openapi.json").json()
    assert spec["paths"]["/api/v1/measurements"]["get"]["operationId"] == "list_measurements"
    assert spec["paths"]["/api/v1/measurements/{table}"]["get"]["operationId"] == "list_measured_rows"

"""The measured tables over JSON: the manifest with provenance, filtered rows, problem+json errors."""
from __future__ import annotations

import pytest

from knowledge import measurements as M


def is_problem(r, status):
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    return r.json()


def test_manifest_list_has_provenance(client):
    body = client.get("/api/v1/measurements", params={"limit": 1000}).json()
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


# --------------------------------------------------------------------------- fits

def test_fits_list_filters_and_pages(client):
    body = client.get("/api/v1/measurements/fits").json()
    assert body["total"] == len(body["items"]) > 0 and "least squares" in body["method"]
    assert {(i["system"], i["table"]) for i in body["items"]} == {(s, t) for s in M.SYSTEMS for t in ("nccl", "custom_allreduce")}
    fit = client.get("/api/v1/measurements/fits", params={"system": "H100_SXM", "table": "nccl", "gpus": 8}).json()
    assert fit["total"] == 1
    item = fit["items"][0]
    assert (item["system"], item["table"], item["gpus"], item["dtype"]) == ("h100_sxm", "nccl", 8, "half")
    manifest = {f["path"]: f for f in M.load_manifest()["files"]}
    assert manifest[item["file"]]["sha256"] == item["sha256"] and manifest[item["file"]]["table"] == "nccl"
    assert item["alpha_s"] == pytest.approx(item["start_up_s"] / 14)
    assert item["link_bytes_per_s"] == pytest.approx(item["algorithm_bytes_per_s"] * 14 / 8)
    rows = client.get(item["rows_url"]).json()   # the rows the fit was made from
    assert rows["total"] == item["points"] and {r["num_gpus"] for r in rows["items"]} == {8}
    assert max(r["message_bytes"] for r in rows["items"]) == item["message_bytes_max"]
    custom = client.get("/api/v1/measurements/fits", params={"table": "custom_allreduce", "system": "l40s"}).json()
    assert custom["total"] == 3 and all(i["backend"] == "vllm_graph" for i in custom["items"])
    page = client.get("/api/v1/measurements/fits", params={"limit": 5, "offset": 5}).json()
    assert len(page["items"]) == 5 and "offset=10" in page["next"] and page["items"][0] == body["items"][5]
    assert client.get("/api/v1/measurements/fits", params={"system": "no_such"}).json()["total"] == 0


@pytest.mark.parametrize("params, field", [({"table": "gemm"}, "table"), ({"table": "nope"}, "table"),
                                           ({"gpus": 0}, "gpus"), ({"gpus": "eight"}, "gpus"), ({"limit": 0}, "limit"),
                                           ({"offset": -1}, "offset")])
def test_fits_bad_filters_are_422_naming_the_field(client, params, field):
    body = is_problem(client.get("/api/v1/measurements/fits", params=params), 422)
    assert [e["field"] for e in body["errors"]] == [field]


def test_fits_is_not_read_as_a_table(client):
    """`/measurements/fits` answers the fits list (a table-column filter is not a 422 there), and the
    table route still answers 404 for names that are not tables."""
    r = client.get("/api/v1/measurements/fits", params={"num_gpus": 8})
    assert r.status_code == 200 and "method" in r.json()
    assert "fits" not in M.TABLES
    for name in ("fit", "fitz", "fits_"):
        assert is_problem(client.get(f"/api/v1/measurements/{name}"), 404)["see"] == "/api/v1/measurements"
    assert client.get("/api/v1/measurements/fits/nccl").status_code == 404


def test_fits_operation_id(client):
    spec = client.get("/openapi.json").json()
    assert spec["paths"]["/api/v1/measurements/fits"]["get"]["operationId"] == "list_measured_fits"
    order = [p for p in spec["paths"] if p.startswith("/api/v1/measurements")]
    assert order.index("/api/v1/measurements/fits") < order.index("/api/v1/measurements/{table}")


def test_llms_txt_names_the_measurement_endpoints(client):
    text = client.get("/llms.txt").text
    assert all(p in text for p in ("/api/v1/measurements)", "/api/v1/measurements/{table}", "/api/v1/measurements/fits"))

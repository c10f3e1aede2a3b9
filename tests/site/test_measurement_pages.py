"""The measured-table pages: the manifest with provenance, rows with filters, a log–log chart for
the communication tables, a JSON twin on each page."""
from __future__ import annotations

import re

import pytest

from api.site.measurements import loglog
from api.urls import urls


def twin_of(html: str) -> str:
    m = re.search(r'class="twin-link">([^<]+)<', html)
    assert m, "no JSON twin link"
    return m.group(1).replace("&amp;", "&")


def test_manifest_page_shows_provenance(client):
    r = client.get(urls.measurements())
    assert r.status_code == 200
    html = r.text
    assert "Apache-2.0" in html and "aiconfigurator-core" in html and "aiconfigurator_core/systems/data/l40s/comm/nccl" in html
    assert twin_of(html) == "/api/v1/measurements"


@pytest.mark.parametrize("table, system, lines", [("nccl", "h100_sxm", 3), ("nccl", "gb200", 2),
                                                  ("custom_allreduce", "l40s", 3)])
def test_comm_pages_draw_one_line_per_gpu_count(client, table, system, lines):
    r = client.get(urls.measurement_table(table, system=system))
    assert r.status_code == 200
    assert "<svg" in r.text and r.text.count("<polyline") == lines and "log–log" in r.text
    assert twin_of(r.text) == f"/api/v1/measurements/{table}?system={system}"
    assert client.get(twin_of(r.text)).status_code == 200


def test_table_page_lists_the_twin_rows(client):
    r = client.get(urls.measurement_table("gemm", system="b200_sxm", m=4096, limit=5))
    assert r.status_code == 200 and "<svg" not in r.text
    rows = client.get(twin_of(r.text)).json()
    assert rows["total"] > 0 and f"of {rows['total']}" in r.text


def test_unknown_table_and_bad_filter(client):
    assert client.get("/measurements/nope").status_code == 404
    r = client.get(urls.measurement_table("gemm", num_gpus=8))
    assert r.status_code == 422 and "num_gpus" in r.text


def test_loglog_ticks_are_powers():
    g = loglog([("2 GPUs", [(512.0, 1e-5), (2.0 ** 29, 2e-2)])], "bytes", "latency")
    assert [t["label"] for t in g["yticks"]][:2] == ["10 µs", "100 µs"]
    assert g["xticks"][0]["label"] == "4 KiB" and g["lines"][0]["points"].count(",") == 2

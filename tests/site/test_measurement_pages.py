"""The measured-table pages: the manifest with provenance, rows with filters, a log–log chart for
the communication tables with the fitted α–β lines and the fit table, the fits page, a JSON twin on
each page."""
from __future__ import annotations

import re

import pytest

from api.site.measurements import fit_curve, loglog
from api.urls import urls


def twin_of(html: str) -> str:
    m = re.search(r'class="twin-link">([^<]+)<', html)
    assert m, "no JSON twin link"
    return m.group(1).replace("&amp;", "&")


def test_manifest_page_shows_provenance(client):
    r = client.get(urls.measurements())
    assert r.status_code == 200
    html = r.text
    assert "Apache-2.0" in html and "aiconfigurator-core" in html and "aiconfigurator_core/systems/data/a100_sxm/comm/nccl" in html
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


# --------------------------------------------------------------------------- fitted α–β lines

FIT_PATH = re.compile(r'<path class="line fit (s\d)" d="([^"]+)"[^>]*data-fit-gpus="(\d+)"')
FIT_ROW = re.compile(r'<tr data-id="([^"]+)" data-fit-gpus="(\d+)"')


def series_classes(html: str) -> dict[str, str]:
    """Legend: series name ("8 GPUs") -> colour class."""
    return {name: cls for cls, name in re.findall(r'<span class="swatch (s\d)" aria-hidden="true"></span>([^<]+)<', html)}


@pytest.mark.parametrize("table, system", [("nccl", "h100_sxm"), ("nccl", "l40s"), ("nccl", "gb200"),
                                           ("custom_allreduce", "b200_sxm"), ("custom_allreduce", "l40s")])
def test_comm_pages_draw_each_fit_dashed_in_its_series_colour(client, table, system):
    html = client.get(urls.measurement_table(table, system=system)).text
    fits = client.get(urls.api_measurement_table("fits", system=system, table=table)).json()["items"]
    drawn = {int(g): (cls, d) for cls, d, g in FIT_PATH.findall(html)}
    assert sorted(drawn) == [f["gpus"] for f in fits] and fits
    legend = series_classes(html)
    for gpus, (cls, d) in drawn.items():
        assert legend[f"{gpus} GPUs"] == cls
        assert d.startswith("M") and d.count(" L") >= 10
    assert html.count('stroke-dasharray="6 4"') == len(fits)
    # the fit table below the chart: a row per GPU count, with the method sentence and the file
    rows = FIT_ROW.findall(html)
    assert [int(g) for _, g in rows] == [f["gpus"] for f in fits]
    assert all(i == f"{system}/{table}/{g}" for i, g in rows)
    assert "Method." in html and "least squares" in html and fits[0]["file"] in html
    for f in fits:
        assert f'data-value="{f["alpha_s"]}"' in html and f'data-value="{f["link_bytes_per_s"]}"' in html
        assert f'data-value="{f["rms_relative_residual"]}"' in html and f'data-value="{f["max_relative_residual"]}"' in html


def test_fits_are_not_drawn_over_rows_they_were_not_fitted_to(client):
    html = client.get(urls.measurement_table("nccl", system="h100_sxm", nccl_dtype="int8")).text
    assert "<svg" in html and not FIT_PATH.search(html)
    assert "choose those in the form" in html and len(FIT_ROW.findall(html)) == 3
    one = client.get(urls.measurement_table("nccl", system="a100_sxm", num_gpus=4)).text
    assert [g for _, _, g in FIT_PATH.findall(one)] == ["4"] and [g for _, g in FIT_ROW.findall(one)] == ["4"]
    gemm = client.get(urls.measurement_table("gemm", system="b200_sxm", limit=2)).text
    assert not FIT_ROW.search(gemm) and "Fitted" not in gemm


def test_fits_page_lists_every_fit_and_its_twin(client):
    r = client.get(urls.measurement_table("fits"))
    assert r.status_code == 200
    body = client.get(twin_of(r.text)).json()
    assert twin_of(r.text) == "/api/v1/measurements/fits"
    assert [i for i, _ in FIT_ROW.findall(r.text)] == [f"{f['system']}/{f['table']}/{f['gpus']}" for f in body["items"]]
    assert body["method"].split(" read as")[0] in r.text and "sha256" in r.text
    only = client.get(urls.measurement_table("fits", system="l40s", gpus=8))
    assert twin_of(only.text) == "/api/v1/measurements/fits?system=l40s&gpus=8"
    assert [i for i, _ in FIT_ROW.findall(only.text)] == ["l40s/custom_allreduce/8", "l40s/nccl/8"]
    bad = client.get(urls.measurement_table("fits", table="gemm"))
    assert bad.status_code == 422 and "table" in bad.text


def test_navigation_links_the_measurements(client):
    html = client.get("/").text
    assert f'<a href="{urls.measurements()}">Measurements</a>' in html
    assert 'aria-current="page">Measurements<' in client.get(urls.measurement_table("fits")).text


def test_fit_curve_follows_the_line():
    pts = fit_curve(1e-5, 1e9, 512.0, 2.0 ** 29, n=5)
    assert len(pts) == 5 and pts[0][0] == pytest.approx(512) and pts[-1][0] == pytest.approx(2.0 ** 29)
    assert all(t == pytest.approx(1e-5 + m / 1e9) for m, t in pts)
    g = loglog([("2 GPUs", [(512.0, 1e-5), (2.0 ** 29, 0.5)])], "bytes", "latency", [(1e-5, 1e9)])
    assert len(g["fit_lines"]) == 1 and g["fit_lines"][0]["cls"] == "s0"
    assert loglog([("2 GPUs", [(512.0, 1e-5), (2.0 ** 29, 0.5)])], "bytes", "latency")["fit_lines"] == []

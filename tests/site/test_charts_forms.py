"""Charts and forms a person enjoys: linear axes for linear quantities, units (and the byte base) on every
axis, limits drawn, every series the result computes, money in USD, text readable on a phone; id fields
offering the store's ids, list fields taken repeated or comma-separated, rates in TFLOP/s and TB/s,
wide tables that say they scroll."""
from __future__ import annotations

import json
import html as htmllib
import re
from itertools import pairwise
from urllib.parse import urlencode

import pytest

from api.site import chart_layout, charts
from api.urls import urls
from calculators.framework.registry import REGISTRY


def page(client, url: str) -> str:
    r = client.get(url)
    assert r.status_code == 200, r.text[:800]
    return r.text


def svgs(html: str) -> list[str]:
    return re.findall(r"<figure class=\"chart\">.*?</figure>", html, re.DOTALL)


def texts(svg: str, cls: str) -> list[str]:
    return [htmllib.unescape(t) for t in re.findall(rf'<text class="{cls}[^"]*"[^>]*>([^<]*)</text>', svg)]


def computed(client, name: str, body: dict) -> dict:
    r = client.post(f"/api/v1/calculators/{name}", json=body)
    assert r.status_code == 200, r.text[:800]
    return r.json()


# --------------------------------------------------------------------------- charts

KV_SWEEP = {"model": "qwen3-8b", "tokens": [1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072]}


def test_kv_cache_token_sweep_has_a_linear_axis(client):
    """KV bytes grow linearly with tokens: the axis is linear (a doubling sweep too), points evenly proportional."""
    chart = REGISTRY["kv-cache"].chart
    d = charts.extract(chart, KV_SWEEP, computed(client, "kv-cache", KV_SWEEP)["outputs"])
    g = chart_layout.layout(d)
    assert g["log_x"] is False
    line = next(l for l in g["lines"] if "bytes_per_request" in l["title"])
    xs = [float(p.split(",")[0]) for p in line["points"].split()]
    ys = [float(p.split(",")[1]) for p in line["points"].split()]
    # linear in x and in y: equal slopes between every pair of points
    slopes = [(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) for i in range(len(xs) - 1)]
    assert max(slopes) == pytest.approx(min(slopes), rel=1e-2)
    html = page(client, urls.calculator("kv-cache", KV_SWEEP))
    assert "log scale" not in html
    # the worked example (a single token count) previews an evenly spaced sweep, drawn linear too
    example = page(client, urls.calculator("kv-cache"))
    assert svgs(example) and "log scale" not in example


def test_log_axis_only_by_the_stated_rule():
    assert chart_layout.use_log_x([1, 2, 4, 8, 16, 32], "auto") is False          # under two decades
    assert chart_layout.use_log_x([2.0 ** k for k in range(10, 21)], "auto") is True  # geometric, ×1024
    assert chart_layout.use_log_x([100 * k for k in range(1, 200)], "auto") is False  # even steps
    assert chart_layout.use_log_x([2.0 ** k for k in range(10, 21)], "linear") is False
    assert chart_layout.use_log_x([1, 10], "log") is True


def test_axis_labels_and_ticks_carry_units_and_base(client):
    html = page(client, urls.calculator("kv-cache", KV_SWEEP))
    svg = svgs(html)[0]
    assert "KV cache (GB, decimal)" in texts(svg, "ylabel")
    yticks = texts(svg, "ytick")
    assert yticks and all(t == "0 GB" or re.fullmatch(r"[\d.,]+ GB", t) for t in yticks), yticks
    assert any(re.fullmatch(r"[\d,]+", t) for t in texts(svg, "xtick"))    # token counts with separators
    # seconds read ms/µs, bytes/s GB/s, binary when asked
    assert chart_layout.axis_label("seconds per step", "s", "decimal", "ms") == "time per step (ms)"
    assert chart_layout.axis_label("payload (bytes)", "B", "binary", "MiB") == "payload (MiB, binary)"
    ticks, name = chart_layout.axis(0, 3e-3, "s")
    assert name == "ms" and ticks[-1][1].endswith(" ms")
    assert chart_layout.fmt_value(450e9, "B/s") == "450 GB/s"
    assert chart_layout.fmt_value(0.0132, "USD") == "$0.0132"


def test_kv_budget_line_when_hardware_is_given(client):
    body = {**KV_SWEEP, "hardware": "h100-sxm", "requests": 8}
    out = computed(client, "kv-cache", body)["outputs"]
    svg = svgs(page(client, urls.calculator("kv-cache", body)))[0]
    assert '<line class="limit"' in svg
    label = next(t for t in texts(svg, "limit-label"))
    assert label.startswith("KV budget: ") and label.endswith(" GB")
    assert float(label.split(": ")[1].split()[0]) == pytest.approx(out["memory_budget_bytes"] / 1e9, rel=1e-3)
    # requests that do not fit the budget are drawn hollow and named in the legend
    assert not all(out["fits"]) and 'class="dot s0 hollow"' in svg
    no_hw = svgs(page(client, urls.calculator("kv-cache", KV_SWEEP)))[0]
    assert 'class="limit"' not in no_hw


def test_parallel_split_draws_what_ifs_and_candidates_that_do_not_fit(client):
    body = {"weight_bytes": 16.4e9, "kv_bytes": 1207959552, "layers": 36, "hidden_size": 4096,
            "memory_bandwidth_bytes_per_s": 2e12, "memory_per_device_bytes": 12e9, "link_alpha_s": 5e-6,
            "link_bandwidth_bytes_per_s": 25e9, "tp": [1, 2, 4, 8],
            "what_if": [{"label": "faster link", "link_bandwidth_bytes_per_s": 400e9}]}
    out = computed(client, "parallel-split", body)["outputs"]
    assert out["fits"][0] is False
    html = page(client, urls.calculator("parallel-split", body))
    svg = svgs(html)[0]
    assert re.search(r'class="line s\d+ what-if"', svg), "the what-if series is not drawn"
    assert "what-if faster link · step_time_s" in html
    assert re.search(r'class="line s\d+ nofit', svg) and "hollow" in svg
    assert "does not fit (hollow point, dashed line)" in html
    assert "best TP: " in " ".join(texts(svg, "marker-label"))
    assert "time per decode step (ms)" in texts(svg, "ylabel")


def test_parallel_split_key_answer_comes_before_the_tables(client):
    html = page(client, urls.calculator("parallel-split", REGISTRY["parallel-split"].extra_examples[0]))
    why = html.index('data-path="why"')
    assert why < html.index('class="outputs"') < html.index('data-path="candidates.0.tp"')
    assert html.index('data-path="best.tp"') < html.index('data-path="candidates.0.tp"')


def test_routing_cost_money_axis_is_in_usd(client):
    svg = svgs(page(client, urls.calculator("routing-cost")))[0]
    assert any("USD" in t for t in texts(svg, "ylabel"))
    assert all(t.startswith("$") for t in texts(svg, "ytick")), texts(svg, "ytick")


def test_chart_text_is_readable_on_a_phone(client):
    """SVG text is in viewBox units: at 390 px wide (358 px of chart) the phone size must read ≥ 11 px."""
    css = page(client, "/static/site.css")
    phone = re.search(r"@media \(max-width: 30rem\) \{(.*?)\n\}", css, re.DOTALL)
    assert phone, "no phone rule for chart text"
    size = float(re.search(r"svg \.xlabel \{ font-size: ([\d.]+)px", phone.group(1)).group(1))
    assert size * (390 - 32) / chart_layout.W >= 11
    # tick labels are thinned so that they fit side by side at that size
    d = charts.ChartData("line", "t", "tokens", "y", series=[charts.Series("a", [float(x) for x in range(1000, 200001, 1000)],
                                                                           [float(x) for x in range(200)])])
    g = chart_layout.layout(d)
    pos = [t["pos"] for t in g["xticks"]]
    widest = max(len(t["label"]) for t in g["xticks"]) * chart_layout.CHAR_W
    assert all(b - a >= widest for a, b in pairwise(pos))


# --------------------------------------------------------------------------- forms

def test_id_fields_offer_the_stores_ids(client):
    html = page(client, urls.calculator("kv-cache"))
    models = re.search(r'<datalist id="l-model">(.*?)</datalist>', html, re.DOTALL)
    hardware = re.search(r'<datalist id="l-hardware">(.*?)</datalist>', html, re.DOTALL)
    assert models and 'value="qwen3-8b"' in models.group(1)
    assert hardware and 'value="h100-sxm"' in hardware.group(1)
    assert re.search(r'<input id="f-hardware"[^>]*list="l-hardware"', html)
    # a list of ids is a multiple select whose choices go out as repeated parameters
    plan = page(client, urls.calculator("deployment-plan"))
    assert re.search(r'<select id="f-hardware" name="hardware" multiple', plan)
    assert re.search(r'<option value="h100-sxm" selected>', plan)
    assert re.search(r'<select id="f-mode" name="mode">', plan)     # a Literal is a select


def lora_values(html: str) -> dict[str, str]:
    return dict(re.findall(r'data-path="([^"]+)" data-value="([^"]*)"', html))


def test_list_fields_take_repeated_and_comma_separated_parameters(client):
    base = {"model": "qwen3-8b", "rank": 16}
    want = lora_values(page(client, urls.calculator("lora", {**base, "target_modules": ["q_proj", "v_proj"]})))
    repeated = client.get("/calculators/lora?" + urlencode([("model", "qwen3-8b"), ("rank", "16"),
                                                            ("target_modules", "q_proj"), ("target_modules", "v_proj")]))
    comma = client.get("/calculators/lora?" + urlencode({"model": "qwen3-8b", "rank": "16", "target_modules": "q_proj, v_proj"}))
    for r in (repeated, comma):
        assert r.status_code == 200, r.text[:800]
        assert 'class="problem"' not in r.text
        got = lora_values(r.text)
        assert {k: v for k, v in got.items() if k in want} == want
    assert 'value="q_proj, v_proj"' in repeated.text   # the form shows the list back
    # one value of a list-only field is a list of one; repeated and comma spellings mix
    one = client.get("/calculators/lora?model=qwen3-8b&rank=16&target_modules=q_proj")
    assert one.status_code == 200 and 'class="problem"' not in one.text
    mixed = client.get("/calculators/lora?model=qwen3-8b&rank=16&target_modules=q_proj,k_proj&target_modules=v_proj")
    assert mixed.status_code == 200 and 'value="q_proj, k_proj, v_proj"' in mixed.text
    # a sweepable field repeated is a sweep
    sweep = client.get("/calculators/kv-cache?model=qwen3-8b&tokens=1024&tokens=2048&tokens=4096")
    assert sweep.status_code == 200 and svgs(sweep.text)


# --------------------------------------------------------------------------- numbers and tables

def test_rates_read_in_tflops_and_tbs_with_the_exact_number_on_hover(client):
    html = page(client, "/hardware/h100-sxm")
    assert "1.9789000e+15" not in html
    assert re.search(r'title="1,978,900,000,000,000[^"]*">1,978\.9 <abbr title="[^"]+">TFLOP/s</abbr>', html)
    assert re.search(r'>3\.35 <abbr title="[^"]+">TB/s</abbr>', html)
    listing = page(client, "/hardware")
    assert "TFLOP/s" in listing and "TB/s" in listing
    assert not re.search(r">[^<>]*\de\+1\d", listing), "a number shown in scientific notation"
    links = page(client, "/links")
    assert "GB/s" in links


def test_wide_tables_scroll_in_a_box_that_says_so(client):
    for url in ("/hardware", "/hardware/h100-sxm", urls.calculator("parallel-split")):
        html = page(client, url)
        assert re.search(r'<div class="scroll wide" tabindex="0" role="region" aria-label="[^"]*scrolls sideways', html), url
        assert 'class="scroll-hint"' in html
    css = page(client, "/static/site.css")
    assert re.search(r"\.scroll \{[^}]*radial-gradient", css)          # the edge shadows
    assert re.search(r"\.scroll-hint \{ display: block; \}", css)       # the hint on narrow screens


@pytest.mark.parametrize("name", ["kv-cache", "parallel-split", "deployment-plan", "routing-cost"])
def test_the_answer_comes_first_on_the_page(client, name):
    """The headline sits right under the title (before the summary and the case list), once."""
    import html as H

    from calculators.framework.registry import REGISTRY

    body = REGISTRY[name].example
    headline = client.post(f"/api/v1/calculators/{name}", json=body).json()["headline"]
    page = H.unescape(client.get(f"/calculators/{name}", params={"body": json.dumps(body)}).text)
    answer = page.index('class="headline answer"')
    assert page.index("<h1") < answer < page.index('class="lead"')
    assert headline in page[answer:answer + len(headline) + 100]
    assert page.count(headline) == 1

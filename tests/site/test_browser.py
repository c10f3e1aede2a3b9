"""The site in headless Chromium against a real server: uvicorn on a free port, a store built into a
temporary directory, Playwright driving /usr/bin/chromium (JavaScript off where the site must work without it).

Skips with a reason when Chromium or Playwright is missing; CI installs them
(`apt-get install -y chromium fonts-noto-cjk`; never `playwright install`).
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections import deque
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin, urlsplit, urlunsplit

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "artifacts" / "screenshots"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]
#: the crawl stops here; reaching it means the site generates links without end
CRAWL_LIMIT = 8000

pytestmark = [
    pytest.mark.skipif(not CHROMIUM.exists(), reason="headless Chromium is not installed at /usr/bin/chromium "
                                                     "(apt-get install -y chromium fonts-noto-cjk)"),
]
from playwright import sync_api  # noqa: E402 - a test dependency (pip install -e '.[test]'): missing it fails


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(built_db, tmp_path_factory):
    """`uvicorn api.app:app` in a subprocess on the built store; yields its base URL."""
    port = _free_port()
    log = tmp_path_factory.mktemp("uvicorn") / "server.log"
    env = {**os.environ, "CASEBOOK_DB": str(built_db), "CASEBOOK_BUILD": "0"}
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:app", "--host", "127.0.0.1", "--port", str(port),
                                 "--log-level", "warning"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 90
    try:
        while True:
            if proc.poll() is not None:
                pytest.fail(f"uvicorn exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
            try:
                with urllib.request.urlopen(base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"uvicorn did not answer /healthz:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def launched(args: list[str]):
    """Headless Chromium under Playwright with `args` (a generator for fixtures to `yield from`); a browser
    that is installed but does not start fails the test."""
    pw = sync_api.sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=args, headless=True)
    except sync_api.Error as exc:  # pragma: no cover - a broken browser install
        pw.stop()
        pytest.fail(f"Chromium at {CHROMIUM} is installed but did not start: {exc}")
    yield b
    b.close()
    pw.stop()


@pytest.fixture(scope="module")
def browser():
    yield from launched(ARGS)


@pytest.fixture()
def page(browser):
    """A page with JavaScript disabled: the site must work without it."""
    ctx = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    yield p
    ctx.close()


def _bound_example():
    """A worked example whose recompute link must show its expected number (book's KV example first)."""
    from calculators.framework.registry import REGISTRY
    from knowledge.loader import default_catalog

    bound = [d for d in default_catalog().records.get("derivation", [])
             if d.get("calculator") in REGISTRY and isinstance(d.get("request"), dict)
             and any(isinstance(v, (int, float)) and not isinstance(v, bool) and "." not in k
                     for k, v in (d.get("expected") or {}).items())]
    bound.sort(key=lambda d: (d["calculator"] != "kv-cache", d["case"] != "model-resource-accounting"))
    return bound[0] if bound else None


def _value(page, path: str) -> str | None:
    cell = page.locator(f'[data-path="{path}"]').first
    return cell.get_attribute("data-value") if cell.count() else None


def test_home_to_case_to_recompute_shows_the_expected_number(page, server):
    from calculators.framework import num

    d = _bound_example()
    assert d is not None, "no worked example is bound to a registered calculator"
    path, want = next((k, v) for k, v in d["expected"].items()
                      if isinstance(v, (int, float)) and not isinstance(v, bool) and "." not in k)
    page.goto(server + "/")
    page.locator(f'main a[href="/cases/{d["case"]}"]').first.click()
    page.wait_for_load_state()
    assert page.url.endswith(f"/cases/{d['case']}")
    link = page.locator(f'section.derivation[id="{d["name"]}"] a.recompute')
    assert link.count() == 1, "the worked example has no recompute link"
    link.click()
    page.wait_for_load_state()
    assert f"/calculators/{d['calculator']}?" in page.url
    got = _value(page, path)
    assert got is not None, f"{path} not shown on {page.url}"
    assert float(got) == pytest.approx(float(want), rel=1e-9)
    assert num(want, 8) in page.locator(f'[data-path="{path}"]').first.inner_text()
    assert page.locator("ol.steps li.step").count() >= 1


def test_submitting_the_raw_body_form(page, server):
    from calculators.framework.registry import REGISTRY

    assert "kv-cache" in REGISTRY
    page.goto(server + "/calculators/kv-cache")
    page.fill("#body", '{"model": "qwen3-8b", "tokens": 8192, "kv_format": "bf16"}')
    page.click("#submit-body")
    page.wait_for_load_state()
    assert "body=" in page.url
    assert _value(page, "bytes_per_token") == "147456"
    assert _value(page, "bytes_per_request") == "1207959552"


def test_submitting_the_fields_form(page, server):
    from calculators.framework.registry import REGISTRY

    assert "edge-transfer" in REGISTRY
    page.goto(server + "/calculators/edge-transfer")
    page.fill("#f-upload_bytes", "60000000")
    page.fill("#f-uplink_bits_per_s", "20000000")
    page.click("#submit-fields")
    page.wait_for_load_state()
    assert "upload_bytes=60000000" in page.url
    assert _value(page, "upload_s") == "24"  # 60 MB × 8 / 20 Mbit/s


def test_invalid_input_shows_the_problem_not_an_error_page(page, server):
    resp = page.goto(server + "/calculators/kv-cache?model=qwen3-8b&tokens=-5")
    assert resp.status == 422
    assert page.locator("section.problem").is_visible()
    assert "tokens" in page.locator("section.problem").inner_text()


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(a["id"])
        if tag == "a" and a.get("href"):
            self.hrefs.append(a["href"])


def _later_page(url: str) -> bool:
    """A page past the first of a paged list (offset > 0): its own links repeat the first page's."""
    from urllib.parse import parse_qs
    offset = parse_qs(urlsplit(url).query).get("offset", ["0"])[0]
    return offset.isdigit() and int(offset) > 0


#: list pages whose filter, facet and sort links combine with each other (/hardware?vendor=…&kind=…&sort=…)
LISTS = ("/hardware", "/models", "/benchmarks", "/prices", "/links", "/frameworks", "/sources", "/search")


def _list_variant(url: str) -> bool:
    """A filtered or sorted variant of a list page: its links are the list's own in other combinations, so it is
    checked for 200 but not crawled on (the combinations of 20 vendors × 5 kinds × sorts never end)."""
    parts = urlsplit(url)
    return parts.path in LISTS and bool(parts.query)


#: families of per-record pages with hundreds of members: the crawl fetches the first SAMPLED of each, in crawl
#: order; the tests that own them fetch every member (tests/site/test_benchmark_pages.py: every benchmark point's
#: page; tests/api/test_validation_api.py: every validation row's point, JSON row and the serving-estimate page
#: computing its request) or one per architecture family (tests/calculators/test_catalogue_coverage.py: the planner
#: on each family of models, whose pages link a plan each)
SAMPLED = 30
PER_POINT = ("/benchmarks/", "/api/v1/benchmarks/", "/validation/", "/api/v1/validation/",
             "/calculators/serving-estimate?", "/api/v1/calculators/serving-estimate?",
             "/calculators/deployment-plan?")


def _family(url: str) -> str | None:
    return next((f for f in PER_POINT if url.startswith(f) and len(url) > len(f)), None)


def test_crawl_every_internal_link_answers_200(browser, server):
    """Breadth-first from `/`: every same-origin link answers 200 and every #fragment exists on its page (of the
    per-benchmark-point families, the first SAMPLED of each)."""
    ctx = browser.new_context(java_script_enabled=False)
    req = ctx.request
    origin = urlsplit(server).netloc
    seen: set[str] = set()
    queue = deque(["/"])
    failures, ids, fragments = [], {}, []
    from collections import Counter
    fetched, skipped = Counter(), Counter()
    try:
        while queue and len(seen) < CRAWL_LIMIT:
            url = queue.popleft()
            if url in seen:
                continue
            seen.add(url)
            fam = _family(url)
            if fam is not None:
                if fetched[fam] >= SAMPLED:
                    skipped[fam] += 1
                    continue
                fetched[fam] += 1
            r = req.get(server + url, max_redirects=3, timeout=60_000)
            if r.status != 200:
                failures.append((url, r.status))
                continue
            if not r.headers.get("content-type", "").startswith("text/html") or url.startswith("/docs"):
                continue  # JSON twins are checked for 200 only; /docs assets come from elsewhere
            if _later_page(url) or _list_variant(url):
                continue  # a list's later pages and filtered variants are checked for 200, not crawled on
            parser = _Links()
            parser.feed(r.text())
            ids[url] = parser.ids
            for href in parser.hrefs:
                full = urlsplit(urljoin(server + url, href))
                if full.scheme not in ("http", "https") or full.netloc != origin:
                    continue
                target = urlunsplit(("", "", full.path or "/", full.query, ""))
                if full.fragment:
                    fragments.append((url, target, full.fragment))
                if target not in seen:
                    queue.append(target)
    finally:
        ctx.close()
    top = Counter(u.split("?")[0] for u in seen).most_common(8)
    assert len(seen) < CRAWL_LIMIT, f"the crawl did not end within {CRAWL_LIMIT} URLs; most visited paths: {top}"
    assert not failures, f"{len(failures)} of {len(seen)} links failed, e.g. {failures[:10]}"
    missing = [(src, t, f) for src, t, f in fragments if t in ids and f not in ids[t]]
    assert not missing, f"links to missing anchors: {missing[:10]}"
    assert len(seen) > 100
    assert fetched["/benchmarks/"] == SAMPLED and skipped["/benchmarks/"] > 0, (fetched, skipped)   # the cap was used


def test_screenshots_phone_width_and_print(browser, server):
    """A calculator page screenshot (artifacts/screenshots/, git-ignored); no sideways scrolling on a
    phone-width viewport; the print stylesheet hides navigation and forms."""
    from calculators.framework.registry import REGISTRY

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    name = "kv-cache"
    assert name in REGISTRY
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    p.goto(server + f"/calculators/{name}")
    assert p.locator("figure.chart svg").count() >= (1 if REGISTRY[name].chart else 0)
    shot = SCREENSHOTS / f"calculator-{name}.png"
    p.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    p.emulate_media(media="print")
    assert not p.locator("header.site nav").is_visible()
    assert not p.locator("form.calc-form").first.is_visible()
    ctx.close()

    phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=2, is_mobile=True)
    p = phone.new_page()
    for url in ["/", "/cases/" + (_bound_example() or {}).get("case", "model-resource-accounting"), f"/calculators/{name}",
                "/hardware", "/models/qwen3-8b"]:
        resp = p.goto(server + url)
        if resp.status == 404:
            continue
        overflow = p.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{url} scrolls sideways by {overflow}px at 390px"
    p.goto(server + "/")
    p.screenshot(path=str(SCREENSHOTS / "home-phone.png"), full_page=False)
    phone.close()


def test_planner_page_fits_desktop_and_phone_widths(browser, server):
    """The planner's page at 1280 and 390 px: the page never scrolls sideways, the candidates table fits or
    scrolls inside its own box with its last column reachable, and the best plan's label text stays in its box
    (the SVG geometry tests in test_planner_chart.py estimate text widths; this measures them)."""
    from api.urls import urls

    body = {"model": "llama-3.1-70b", "arrival_rate_per_s": 10, "input_tokens": 2000, "output_tokens": 500, "ttft_s": 2, "tpot_s": 0.05}
    url = server + urls.calculator("deployment-plan", body)
    for width, height in ((1280, 800), (390, 844)):
        ctx = browser.new_context(java_script_enabled=False, viewport={"width": width, "height": height})
        p = ctx.new_page()
        assert p.goto(url).status == 200
        m = p.evaluate("""() => {
          const box = document.querySelector('.planner-scroll'), table = box.querySelector('table');
          const overflow = getComputedStyle(box).overflowX;
          box.scrollLeft = box.scrollWidth;
          const b = box.getBoundingClientRect(), last = table.querySelector('thead th:last-child').getBoundingClientRect();
          const label = document.querySelector('svg.pareto .best-label').getBBox();
          const r = document.querySelector('svg.pareto .best-box');
          return {page: document.scrollingElement.scrollWidth, inner: innerWidth, overflow, table: table.scrollWidth,
                  client: box.clientWidth, boxLeft: b.left + box.clientLeft, boxRight: b.left + box.clientLeft + box.clientWidth, lastLeft: last.left,
                  lastRight: last.right, label: [label.x, label.y, label.x + label.width, label.y + label.height],
                  rect: ['x', 'y', 'width', 'height'].map(k => parseFloat(r.getAttribute(k)))};
        }""")
        ctx.close()
        assert m["page"] <= m["inner"], f"the planner page scrolls sideways at {width}px: {m}"
        assert m["overflow"] in ("auto", "scroll"), m
        if width == 1280:
            assert m["table"] <= m["client"] + 1, f"the candidates table does not fit at 1280px: {m}"
        assert m["boxLeft"] - 1 <= m["lastLeft"] and m["lastRight"] <= m["boxRight"] + 1, f"last column out of reach: {m}"
        x, y, w, h = m["rect"]
        lx0, ly0, lx1, ly1 = m["label"]
        assert x <= lx0 and lx1 <= x + w and y - 1 <= ly0 and ly1 <= y + h + 1, f"label text {m['label']} outside its box {m['rect']}"

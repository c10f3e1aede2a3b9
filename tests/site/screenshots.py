"""Screenshots of calculator pages with a computed example, at desktop (1280×800) and phone (390×844) size,
into `artifacts/screenshots/` (git-ignored), for a person to look at how charts and forms read.

    .venv/bin/python -m tests.site.screenshots [--db PATH] [--out DIR] [--only NAME ...]

Starts `casebook`'s app under uvicorn on a free port (the store at --db, built when missing), opens
every page in headless Chromium (JavaScript off: the site works without it) and writes
`<name>-desktop.png` and `<name>-phone.png` (the first screen: what is visible without scrolling),
`<name>-desktop-full.png`, `<name>-phone-full.png` (the whole page) and `<name>-chart<i>-<desktop|phone>.png`
(each chart figure). Not a test: `tests/site/test_browser.py` asserts; this shows.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking"]

#: (file name, calculator, request body): computed examples that exercise the charts
PAGES: list[tuple[str, str, dict]] = [
    ("kv-cache", "kv-cache", {"model": "qwen3-8b", "hardware": "h100-sxm", "requests": 8,
                              "tokens": [4096, 8192, 16384, 32768, 65536, 98304, 131072]}),
    ("parallel-split", "parallel-split", {
        "model": "qwen3-8b", "context_tokens": 32768, "batch": 8, "memory_bandwidth_bytes_per_s": 3.35e12,
        "memory_per_device_bytes": 40e9, "link_alpha_s": 2e-6, "link_bandwidth_bytes_per_s": 450e9, "tp": [1, 2, 4, 8],
        "what_if": [{"label": "PCIe Gen5 link (64 GB/s)", "link_bandwidth_bytes_per_s": 64e9, "link_alpha_s": 8e-6}]}),
    ("deployment-plan", "deployment-plan", {"model": "llama-3.1-70b", "arrival_rate_per_s": 10, "input_tokens": 2000,
                                            "output_tokens": 500, "ttft_s": 2, "tpot_s": 0.05}),
    ("routing-cost", "routing-cost", None),
    ("kv-cache-example", "kv-cache", None),
    ("hardware-h100", "/hardware/h100-sxm", None),
    ("hardware-list", "/hardware", None),
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(db: Path) -> tuple[subprocess.Popen, str]:
    """uvicorn on the store at `db`, answering /healthz."""
    import httpx

    port = _free_port()
    env = {**os.environ, "CASEBOOK_DB": str(db), "CASEBOOK_BUILD": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "api.app:app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], env=env, cwd=str(ROOT))
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError("uvicorn exited early")
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("server did not become healthy")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "casebook-screenshots.duckdb")
    ap.add_argument("--out", type=Path, default=ROOT / "artifacts" / "screenshots")
    ap.add_argument("--only", nargs="*", default=None, help="file names of PAGES to shoot")
    a = ap.parse_args(argv)
    if not CHROMIUM.exists():
        print(f"no Chromium at {CHROMIUM}", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from api.urls import urls
    from knowledge.build import build

    if not a.db.exists():
        build(a.db)
    a.out.mkdir(parents=True, exist_ok=True)
    proc, server = serve(a.db)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
            desktop = browser.new_context(java_script_enabled=False, viewport={"width": 1280, "height": 800})
            phone = browser.new_context(java_script_enabled=False, viewport={"width": 390, "height": 844},
                                        device_scale_factor=2)
            for fname, calc, body in PAGES:
                if a.only and fname not in a.only:
                    continue
                url = server + (calc if calc.startswith("/") else urls.calculator(calc, body))
                for ctx, suffix in ((desktop, "desktop"), (phone, "phone")):
                    p = ctx.new_page()
                    resp = p.goto(url)
                    if resp is None or resp.status != 200:
                        print(f"{fname}: HTTP {resp.status if resp else '?'} at {url}", file=sys.stderr)
                    p.screenshot(path=str(a.out / f"{fname}-{suffix}.png"))
                    p.screenshot(path=str(a.out / f"{fname}-{suffix}-full.png"), full_page=True)
                    charts = p.locator("figure.chart")
                    for i in range(min(charts.count(), 3)):
                        charts.nth(i).screenshot(path=str(a.out / f"{fname}-chart{i + 1}-{suffix}.png"))
                    overflow = p.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                    print(f"{fname} {suffix}: {resp.status if resp else '?'}; sideways overflow {overflow}px")
                    p.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(f"written to {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

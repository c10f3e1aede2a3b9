"""The screenshots kept in `docs/screenshots/` (listed in its README): calculator pages with a computed example at
desktop (1280 px wide) and phone (390 px wide) size, as the first screen of each page and as crops of the parts
that issue #28 changed (the planner's chart and candidates table, a sweep's lists of numbers).

    .venv/bin/python -m tests.site.doc_screenshots [--db PATH] [--out DIR]

Serves the app on a free port like `tests/site/screenshots.py` (whose requests it shoots, so the two agree) and
keeps every file small: a crop is at most CROP_HEIGHT CSS pixels tall, and each file is checked under MAX_BYTES.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "screenshots"
#: (suffix, viewport, device scale factor)
SIZES = (("desktop", {"width": 1280, "height": 800}, 1), ("phone", {"width": 390, "height": 844}, 2))
CROP_HEIGHT = 640
MAX_BYTES = 300_000
#: first screens: the file names of tests/site/screenshots.PAGES to keep
FIRST_SCREENS = ("kv-cache", "parallel-split", "deployment-plan")
#: crops: (file name, PAGES entry, CSS selector)
CROPS = (("planner-chart", "deployment-plan", "figure.planner-chart"),
         ("planner-table", "deployment-plan", ".planner-scroll"),
         ("kv-cache-lists", "kv-cache", "table.outputs"))


def shoot(page, selector: str, path: Path) -> None:
    """The element at `selector`, its top CROP_HEIGHT CSS pixels at most (clipped from the whole page)."""
    box = page.evaluate("""(sel) => { const r = document.querySelector(sel).getBoundingClientRect();
        return {x: r.left + scrollX, y: r.top + scrollY, width: Math.min(r.width, innerWidth - r.left), height: r.height}; }""",
                        selector)
    box["height"] = min(box["height"], CROP_HEIGHT)
    page.screenshot(path=str(path), full_page=True, clip=box)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", type=Path, default=Path(tempfile.gettempdir()) / "casebook-screenshots.duckdb")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    from api.urls import urls
    from knowledge.build import build
    from tests.site.screenshots import ARGS, CHROMIUM, PAGES, serve

    if not CHROMIUM.exists():
        print(f"no Chromium at {CHROMIUM}", file=sys.stderr)
        return 1
    if not a.db.exists():
        build(a.db)
    a.out.mkdir(parents=True, exist_ok=True)
    bodies = {name: (calc, body) for name, calc, body in PAGES}
    proc, server = serve(a.db)
    written: list[Path] = []
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
            for suffix, viewport, scale in SIZES:
                ctx = browser.new_context(java_script_enabled=False, viewport=viewport, device_scale_factor=scale)
                for name in dict.fromkeys(list(FIRST_SCREENS) + [page for _, page, _ in CROPS]):
                    calc, body = bodies[name]
                    p = ctx.new_page()
                    resp = p.goto(server + urls.calculator(calc, body))
                    if resp is None or resp.status != 200:
                        raise RuntimeError(f"{name}: HTTP {resp.status if resp else '?'}")
                    overflow = p.evaluate("document.scrollingElement.scrollWidth - innerWidth")
                    if name in FIRST_SCREENS:
                        written.append(a.out / f"{name}-{suffix}.png")
                        p.screenshot(path=str(written[-1]))
                    for crop, page_name, selector in CROPS:
                        if page_name == name:
                            written.append(a.out / f"{crop}-{suffix}.png")
                            shoot(p, selector, written[-1])
                    print(f"{name} {suffix}: sideways overflow {overflow}px")
                    p.close()
                ctx.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    big = [f"{f.name} ({f.stat().st_size:,} B)" for f in written if f.stat().st_size > MAX_BYTES]
    for f in written:
        print(f"{f.relative_to(a.out.parent) if a.out.parent in f.parents else f}: {f.stat().st_size:,} B")
    if big:
        print(f"over {MAX_BYTES:,} B: {', '.join(big)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

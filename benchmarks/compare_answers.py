"""Before/after check for refactors: every calculator's example and every bound worked example, answered over
the API, saved to a JSON file and compared with a later run.

    .venv/bin/python benchmarks/compare_answers.py --save /tmp/before.json   # on the old tree
    .venv/bin/python benchmarks/compare_answers.py --check /tmp/before.json  # on the new tree: exit 1 on a change

Only the HTTP app and the data files are used, so the script runs unchanged on both sides of a move of
`calculators/`. Answers are compared as JSON, whole (outputs, steps, assumptions, headline, links).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def answers() -> dict[str, object]:
    from fastapi.testclient import TestClient

    from api.app import create_app
    from api.settings import Settings

    out: dict[str, object] = {}
    with TestClient(create_app(Settings())) as client:
        listing = client.get("/api/v1/calculators?limit=100").json()
        # keyed by name: the listing's order follows module names, which a move may change
        out["GET /api/v1/calculators"] = {calc["name"]: calc for calc in listing}
        for calc in listing:
            name = calc["name"]
            r = client.post(f"/api/v1/calculators/{name}", json=calc["example"])
            out[f"example {name}"] = {"status": r.status_code, "body": r.json()}
        for path in sorted((ROOT / "knowledge/data/derivations").glob("*.yaml")):
            for d in yaml.safe_load(path.read_text()) or []:
                if not d.get("calculator"):
                    continue
                r = client.post(f"/api/v1/calculators/{d['calculator']}", json=d["request"])
                out[f"derivation {d['case']}/{d['name']}"] = {"status": r.status_code, "body": r.json()}
    return out


def diff(a: object, b: object, path: str = "") -> list[str]:
    if type(a) is not type(b):
        return [f"{path}: {a!r} -> {b!r}"]
    if isinstance(a, dict):
        found = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                found.append(f"{path}.{k}: {'added' if k in b else 'removed'}")
            else:
                found += diff(a[k], b[k], f"{path}.{k}")
        return found
    if isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} -> {len(b)}"]
        return [x for i, (p, q) in enumerate(zip(a, b)) for x in diff(p, q, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--save", type=Path)
    ap.add_argument("--check", type=Path)
    args = ap.parse_args()
    now = answers()
    if args.save:
        args.save.write_text(json.dumps(now, ensure_ascii=False, sort_keys=True))
        print(f"saved {len(now)} answers to {args.save}")
    if args.check:
        before = json.loads(args.check.read_text())
        changed = 0
        for key in sorted(set(before) | set(now)):
            found = diff(before.get(key), now.get(key), key)
            if found:
                changed += 1
                print("\n".join(found[:10]))
        print(f"{len(now)} answers compared with {len(before)} saved: {changed} changed")
        return 1 if changed else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

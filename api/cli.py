"""`casebook`: serve the API and site, build the store, run a calculator, report coverage and calibration."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from calculators.framework.suggest import did_you_mean
from knowledge.build import DEFAULT_DB


def cmd_serve(args) -> int:
    """Verify the store (rebuilding it when allowed and needed), copy it into a private directory, and serve
    that copy: every worker opens the same immutable file, whatever happens to the original meanwhile."""
    import shutil
    import tempfile

    from api import server
    from api.settings import Settings

    try:
        settings = Settings()
    except ValueError as exc:
        print(f"casebook serve: bad setting: {exc}", file=sys.stderr)
        return 2
    host = args.host or settings.host
    port = settings.port if args.port is None else args.port
    workers = args.workers or settings.workers
    may_build = settings.build_if_stale if args.build is None else args.build
    db = Path(args.db)
    remove_stale_runtime_dirs(settings.runtime_dir)
    runtime = None
    try:
        runtime = Path(tempfile.mkdtemp(prefix=RUNTIME_PREFIX, dir=settings.runtime_dir))
        owner = _own_runtime_dir(runtime)
    except OSError as exc:
        if runtime is not None:
            shutil.rmtree(runtime, ignore_errors=True)
        print(f"casebook serve: cannot create a private directory in {settings.runtime_dir} "
              f"(CASEBOOK_RUNTIME_DIR): {exc}", file=sys.stderr)
        return 1
    try:
        snapshot = _serving_snapshot(db, runtime, may_build)
        if snapshot is None:
            return 1
        print(f"serving {db} (content {snapshot.content_hash[:16]}, sha256 {snapshot.sha256[:16]}, "
              f"{snapshot.rows} rows verified) from the private copy {snapshot.path}", file=sys.stderr)
        # workers open the verified copy read-only; none of them builds
        os.environ["CASEBOOK_DB"] = str(snapshot.path)
        os.environ["CASEBOOK_BUILD"] = "0"
        config = server.uvicorn_config(settings, host, port, workers, log_level=args.log_level,
                                       access_log=args.access_log)
        status = server.run(config)
        if status:
            print(f"casebook serve: the server could not start or keep its workers running on {host}:{port} "
                  "(see the errors above)", file=sys.stderr)
        return status
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
        os.close(owner)


#: serve's private directories in CASEBOOK_RUNTIME_DIR: `casebook-serve-XXXXXXXX/`, holding the copy of the store
#: and OWNER_LOCK, a file that the serving process keeps locked (flock) while it runs and that names its pid
RUNTIME_PREFIX = "casebook-serve-"
OWNER_LOCK = "serve.lock"


def _own_runtime_dir(runtime: Path) -> int:
    """Lock `runtime` as this process's (OWNER_LOCK, its pid inside); the lock's descriptor, held until serve
    ends and released by the kernel however serve ends. The file is locked before it gets its name, so
    another serve never sees it unlocked while this one runs."""
    import fcntl

    pending = runtime / f".{OWNER_LOCK}.{os.getpid()}"
    fd = os.open(pending, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.replace(pending, runtime / OWNER_LOCK)
    except OSError:
        os.close(fd)
        raise
    return fd


def remove_stale_runtime_dirs(parent: Path) -> list[Path]:
    """Remove the private directories (and store copies) of servers that are gone: those whose OWNER_LOCK
    nobody holds any more, left by a serve that was killed (SIGKILL, OOM killer) before it could clean up.
    A running server's directory (its lock held) and directories without a lock (being created, or from an
    older serve: their owner cannot be told) are left alone. Returns what was removed."""
    import fcntl
    import shutil
    import stat

    removed = []
    try:
        candidates = sorted(Path(parent).glob(RUNTIME_PREFIX + "*"))
    except OSError:
        return removed
    for d in candidates:
        try:
            st = d.lstat()
            if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
                continue
            fd = os.open(d / OWNER_LOCK, os.O_RDWR | os.O_NOFOLLOW)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue                                  # held: its server runs
            pid = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
            shutil.rmtree(d, ignore_errors=True)
            if not d.exists():
                removed.append(d)
                print(f"casebook serve: removed {d}, the private copy of a server (pid {pid}) that is gone",
                      file=sys.stderr)
        finally:
            os.close(fd)
    return removed


def _serving_snapshot(db: Path, runtime: Path, may_build: bool):
    """A verified private copy of the store (`knowledge.store.snapshot_store`), rebuilt first from the data
    files when it is missing, stale, truncated or corrupted and building is allowed; None (after saying why)
    when it cannot be served. A sound store that is only stale is served as it is when the data files do not
    build (saying why, also to the workers: CASEBOOK_STORE_STALE_REASON, shown in /healthz); a private copy that
    cannot be written (a full CASEBOOK_RUNTIME_DIR) stops serve without touching the store."""
    from knowledge.build import STALE_REASON_ENV, BuildError, build, content_hash, stale_reason
    from knowledge.store import StoreCopyFailed, StoreInvalid, snapshot_store

    os.environ.pop(STALE_REASON_ENV, None)
    reason, older = None, None
    try:
        snapshot = snapshot_store(db, runtime)
    except StoreCopyFailed as exc:
        _copy_failed(db, exc)
        return None
    except StoreInvalid as exc:
        snapshot, reason = None, exc.reason
    else:
        expected = content_hash()
        if snapshot.content_hash != expected:
            if not may_build:
                print(f"casebook serve: warning: {db} was built from other data files than knowledge/data "
                      "(building is off: serving it as it is)", file=sys.stderr)
                return snapshot
            snapshot, older, reason = None, snapshot, "stale: built from other data files"
    if snapshot is not None:
        return snapshot
    if not may_build:
        print(f"casebook serve: refusing to serve {db}: {reason}.\n"
              "Rebuild it with `casebook build` (building at start is off: CASEBOOK_BUILD=0 or --no-build).",
              file=sys.stderr)
        return None
    t0 = time.perf_counter()
    print(f"casebook serve: building {db}: {reason}", file=sys.stderr)
    try:
        build(db)
    except (BuildError, OSError) as exc:
        what = f"the data files do not build.\n{exc}" if isinstance(exc, BuildError) else f"cannot write {db}: {exc}"
        print(f"casebook serve: {what}", file=sys.stderr)
        if older is None:
            return None
        why = stale_reason(exc)
        print(f"casebook serve: serving the older store {db} (content {older.content_hash[:16]}) as it is: {why}",
              file=sys.stderr)
        os.environ[STALE_REASON_ENV] = why
        return older
    print(f"built {db} in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
    if older is not None:
        older.path.unlink(missing_ok=True)
    try:
        return snapshot_store(db, runtime)
    except StoreCopyFailed as exc:
        _copy_failed(db, exc)
        return None
    except StoreInvalid as exc:
        print(f"casebook serve: refusing to serve {db}: {exc.reason}", file=sys.stderr)
        return None


def _copy_failed(db: Path, exc) -> None:
    """Say that the private copy could not be written, and that the store itself is not at fault."""
    print(f"casebook serve: {exc.reason} (CASEBOOK_RUNTIME_DIR). {db} itself reads fine and was left as it is "
          "(not rebuilt); free space there or point CASEBOOK_RUNTIME_DIR at another directory.", file=sys.stderr)


def cmd_build(args) -> int:
    from knowledge import build

    return build.main((["--db", str(args.db)] if args.db else []) + (["--check"] if args.check else []))


def _store(db: Path):
    from knowledge.build import ensure_built
    from knowledge.store import Store

    ensure_built(db)
    return Store(db)


def cmd_calc(args) -> int:
    from api.service import CalculationFailed, calculate
    from calculators.framework import jsonable
    from calculators.framework.registry import REGISTRY

    if args.list or not args.name:
        for c in REGISTRY.values():
            print(f"{c.name:24} {c.summary}")
        return 0
    if args.name not in REGISTRY:
        print(f"unknown calculator {args.name!r}.{did_you_mean(args.name, REGISTRY)} "
              "`casebook calc --list` lists them", file=sys.stderr)
        return 2
    try:
        body = json.loads(args.json) if args.json else dict(REGISTRY[args.name].example)
    except json.JSONDecodeError as exc:
        print(f"--json is not valid JSON: {exc}", file=sys.stderr)
        return 2
    for item in args.set or []:
        key, _, value = item.partition("=")
        try:
            body[key] = json.loads(value)
        except json.JSONDecodeError:
            body[key] = value
    store = _store(args.db)
    try:
        env = jsonable(calculate(args.name, body, store))   # plain Python for json.dumps (sweeps are arrays)
    except CalculationFailed as exc:
        print(json.dumps(exc.body, indent=2, ensure_ascii=False), file=sys.stderr)
        return 1
    if args.format == "json":
        print(json.dumps(env, indent=2, ensure_ascii=False))
    elif args.format == "markdown":
        from api.markdown import render_markdown
        print(render_markdown(env, REGISTRY[args.name]))
    else:
        _print_text(env)
    return 0


def _print_text(env: dict) -> None:
    print(f"{env['calculator']}")
    print("outputs:")
    for k, v in env["outputs"].items():
        text = json.dumps(v, ensure_ascii=False)
        print(f"  {k}: {text if len(text) < 200 else text[:200] + ' …'}")
    print("steps:")
    for s in env["steps"]:
        print(f"  {s['label']}: {s['formula']}")
        print(f"      = {s['substituted']}")
        print(f"      = {s['value']} {s['unit']}")
    if env["assumptions"]:
        print("assumptions:")
        for a in env["assumptions"]:
            print(f"  - {a}")
    for s in env["inputs"].get("sources", []):
        print(f"source: {s.get('record')}.{s.get('field')} = {s.get('value')} ({s.get('source')}, {s.get('locator')})")
    print(f"explanation: {env['explanation_url']}")


def cmd_coverage(args) -> int:
    from knowledge.coverage import coverage
    from knowledge.derivations import recompute
    from knowledge.loader import catalog_lookup, load_catalog

    cat = load_catalog()
    lookup = catalog_lookup(cat)
    reproduced = {}
    for d in cat.records.get("derivation", []):
        if d.get("calculator"):
            try:
                reproduced[d["id"]] = all(c.ok for c in recompute(d, lookup))
            except Exception:  # noqa: BLE001 - a failing request counts as not reproduced
                reproduced[d["id"]] = False
    cov = coverage(cat.records.get("case", []), cat.records.get("derivation", []), reproduced)
    if args.json:
        print(json.dumps(cov, indent=2, ensure_ascii=False))
        return 0
    print(f"{'case':44} stored bound reproduced printed checked  unbound families")
    for row in cov["per_case"]:
        print(f"{row['slug']:44} {row['stored']:6} {row['bound']:5} {row['reproduced']:10} {row['printed_numbers']:7} "
              f"{row['checked_numbers']:7}  {', '.join(row['families_unbound'])}")
    if args.unbound:
        print()
        print("unbound examples and why:")
        for row in cov["per_case"]:
            for u in row["unbound"]:
                print(f"  {u['id']}: {u['reason'] or '(no reason given)'}")
    print()
    print(f"cases: {cov['cases']}   derivations: {cov['derivations']}   bound: {cov['bound']} "
          f"({100 * cov['bound_fraction']:.1f} %)   reproduced: {cov['reproduced']} of {cov['bound']}")
    print(f"printed numbers of bound examples: {cov['printed_numbers']}   checked: {cov['checked_numbers']} "
          f"({100 * cov['checked_fraction']:.1f} %)   excused (unchecked): {cov['excused_numbers']}")
    by, nc = cov.get("checked_by", {}), cov.get("not_counted_by", {})
    print(f"  checked against outputs: {by.get('output', 0)}   derived from outputs: {by.get('derived', 0)}   "
          f"verdicts and labels checked: {cov.get('checked_words', 0)} of {cov.get('printed_words', 0)}")
    print(f"  not counted: printed givens matched: {nc.get('given', 0)}   echo checks: {nc.get('echo', 0)}   "
          f"unchecked: {nc.get('unchecked', 0)}   examples with a counted check: {cov.get('checked_examples', 0)} of "
          f"{cov['bound']} bound")
    print(f"  rule: {cov.get('counting_rule', '')}")
    for n in cov.get("not_counted", []):
        if n["kind"] != "given":
            print(f"  not counted ({n['kind']}): {n['id']} {n['entry']} {n['number']}: {n['reason']}")
    for nq in cov.get("not_quantities", []):
        print(f"  not a quantity: {nq['id']} {nq['entry']} = {nq['text']!r}: {nq['reason']}")
    print(f"unbound examples without a reason: {cov['unbound_without_reason']}   rule violations: {cov['violations']} "
          f"in {cov['derivations_with_violations']} examples (python -m knowledge.derivations --audit)")
    print(f"calculators used: {len(cov['calculators_used'])} ({', '.join(cov['calculators_used'])})")
    print(f"families without a calculator: {', '.join(cov['families_without_calculator']) or 'none'}")
    return 0 if cov["reproduced"] == cov["bound"] else 1


def cmd_calibration(args) -> int:
    """Compute the calibration report over the data files and print its summary (or the whole report as JSON)."""
    from knowledge.calibration import calibration_report, format_text
    from knowledge.loader import catalog_lookup, default_catalog

    t0 = time.perf_counter()
    report = calibration_report(catalog_lookup(default_catalog()))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(format_text(report))
    print(f"\ncomputed in {time.perf_counter() - t0:.1f} s; the full table: casebook calibration --json, or /calibration")
    return 0


def cmd_validate(args) -> int:
    """serving-estimate against every stored benchmark point: the error tables (or the whole answer as JSON). The
    report is read from beside the store when a server or an earlier run computed it for this data and code."""
    from api.routes.validation import ValidationQuery, format_text, report, view

    t0 = time.perf_counter()
    answer = view(report(_store(args.db)), ValidationQuery(source=args.source))
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
        return 0
    print(format_text(answer))
    print(f"\nin {time.perf_counter() - t0:.1f} s; every row: casebook validate --json, or /validation")
    return 0


def cmd_import_measurements(args) -> int:
    from knowledge import measurements

    return measurements.main(["--wheel", str(args.wheel)] + (["--out", str(args.out)] if args.out else []))


def cmd_import_models(args) -> int:
    from knowledge import model_import

    return model_import.main(["--wheel", str(args.wheel)] + ([] if args.dry_run else ["--write"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="casebook", description="AI Infra Casebook: sourced facts and calculators.")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("serve", help="verify the store (build it if missing, stale or damaged), then serve API + site + MCP")
    p.add_argument("--host", default=None, help="address to listen on (default: CASEBOOK_HOST or 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default: CASEBOOK_PORT or 8000)")
    p.add_argument("--workers", type=int, default=None,
                   help="server processes sharing one read-only copy of the store (default: CASEBOOK_WORKERS or 1)")
    p.add_argument("--db", type=Path, default=DEFAULT_DB)
    p.add_argument("--build", action=argparse.BooleanOptionalAction, default=None,
                   help="rebuild a missing, stale or damaged store from the data files (default: CASEBOOK_BUILD, on)")
    p.add_argument("--log-level", default="info")
    p.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True)
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("build", help="validate the data files and write the store")
    p.add_argument("--db", type=Path, default=None)
    p.add_argument("--check", action="store_true", help="validate only")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("calc", help="run a calculator: casebook calc kv-cache --json '{...}'")
    p.add_argument("name", nargs="?")
    p.add_argument("--json", help="request body as JSON (default: the calculator's example)")
    p.add_argument("--set", action="append", metavar="FIELD=VALUE", help="override one field (JSON value)")
    p.add_argument("--format", choices=("text", "json", "markdown"), default="text")
    p.add_argument("--list", action="store_true", help="list calculators")
    p.add_argument("--db", type=Path, default=DEFAULT_DB)
    p.set_defaults(func=cmd_calc)

    p = sub.add_parser("coverage", help="per case: worked examples stored, bound, reproduced; printed numbers checked")
    p.add_argument("--json", action="store_true")
    p.add_argument("--unbound", action="store_true", help="also list every unbound example with its reason")
    p.set_defaults(func=cmd_coverage)

    p = sub.add_parser("calibration", help="measured step estimate vs peak-rate bound over a grid, and leave-one-out errors")
    p.add_argument("--json", action="store_true", help="the whole report (every configuration) as JSON")
    p.set_defaults(func=cmd_calibration)

    p = sub.add_parser("validate", help="serving-estimate against every stored benchmark point: errors by source, "
                                        "hardware, model family, framework and load")
    p.add_argument("--json", action="store_true", help="the whole answer (every row) as JSON")
    p.add_argument("--source", default=None, help="only the points of this source id")
    p.add_argument("--db", type=Path, default=DEFAULT_DB)
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("import-measurements",
                       help="copy the measured kernel tables out of the aiconfigurator-core 0.12.0 wheel")
    p.add_argument("--wheel", type=Path, required=True, help="pip download aiconfigurator-core==0.12.0 --no-deps")
    p.add_argument("--out", type=Path, default=None, help="target directory (default: knowledge/data/measured)")
    p.set_defaults(func=cmd_import_measurements)

    p = sub.add_parser("import-models",
                       help="import every Hugging Face config bundled in the aiconfigurator-core wheel that the store lacks")
    p.add_argument("--wheel", type=Path, required=True, help="pip download aiconfigurator-core==0.12.0 --no-deps")
    p.add_argument("--dry-run", action="store_true", help="list what would be imported and skipped; write nothing")
    p.set_defaults(func=cmd_import_models)

    args = ap.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())

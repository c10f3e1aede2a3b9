"""The `casebook` command and the README's Quick start entry points."""
from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
CASEBOOK = [sys.executable, "-m", "api.cli"]


def run(*args, **kw):
    return subprocess.run([*CASEBOOK, *args], capture_output=True, text=True, cwd=ROOT, timeout=300, **kw)


def test_readme_quick_start_has_exactly_two_lines_that_make_knows():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = re.search(r"## Quick start\n```bash\n(.*?)```", text, re.S)
    assert block, "README needs a '## Quick start' section starting with a ```bash block"
    lines = [l for l in block.group(1).splitlines() if l.strip()]
    assert lines == ["make run", "make test"]
    for target, expect in (("run", "casebook serve"), ("test", "pytest")):
        dry = subprocess.run(["make", "-n", target], capture_output=True, text=True, cwd=ROOT)
        assert dry.returncode == 0 and expect in dry.stdout, dry.stdout + dry.stderr


def test_ci_runs_the_readme_test_line():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "Quick start" in ci and "chromium" in ci and "-eq 5" in ci


def test_build_writes_a_store_and_check_validates(tmp_path):
    db = tmp_path / "cli.duckdb"
    r = run("build", "--db", str(db))
    assert r.returncode == 0, r.stderr
    assert db.exists() and "case 71" in r.stdout
    assert run("build", "--check").returncode == 0


def test_calc_prints_result_with_steps(built_db):
    r = run("calc", "kv-cache", "--json", '{"model":"qwen3-8b","tokens":8192}', "--db", str(built_db))
    assert r.returncode == 0, r.stderr
    assert "bytes_per_token: 147456" in r.stdout and "steps:" in r.stdout and "source:" in r.stdout
    j = run("calc", "kv-cache", "--json", '{"model":"qwen3-8b","tokens":8192}', "--format", "json", "--db", str(built_db))
    assert json.loads(j.stdout)["outputs"]["bytes_per_request"] == 1207959552


def test_calc_bad_input_is_a_clear_error(built_db):
    r = run("calc", "kv-cache", "--json", '{"model":"qwen3-8b","tokens":-1}', "--db", str(built_db))
    assert r.returncode == 1 and '"field": "tokens"' in r.stderr
    assert run("calc", "no-such-calculator", "--db", str(built_db)).returncode == 2
    assert run("calc", "kv-cache", "--json", "{oops", "--db", str(built_db)).returncode == 2


def test_calc_suggests_the_closest_calculator_and_id(built_db):
    r = run("calc", "kv-cach", "--db", str(built_db))
    assert r.returncode == 2 and "Did you mean 'kv-cache'" in r.stderr
    r = run("calc", "kv-cache", "--json", '{"model":"qwen3-8", "tokens": 8}', "--db", str(built_db))
    assert r.returncode == 1
    error = json.loads(r.stderr)["errors"][0]
    assert error["field"] == "model" and error["suggestions"][0] == "qwen3-8b"


def test_calc_list_names_every_calculator():
    from calculators.framework.registry import REGISTRY

    out = run("calc", "--list").stdout
    assert all(name in out for name in REGISTRY)


def test_coverage_reports_every_case():
    r = run("coverage", "--json")
    cov = json.loads(r.stdout)
    assert cov["cases"] == 71 and cov["derivations"] >= 300
    assert cov["reproduced"] == cov["bound"]
    assert r.returncode == 0


def test_serve_with_two_workers_shares_the_read_only_store(built_db):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([*CASEBOOK, "serve", "--workers", "2", "--port", str(port), "--db", str(built_db),
                             "--no-access-log", "--log-level", "warning"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        hashes = set()
        with httpx.Client(base_url=url) as c:
            for _ in range(40):  # new connections land on both workers
                r = c.get("/healthz", headers={"Connection": "close"})
                assert r.status_code == 200
                hashes.add(r.json()["content_hash"])
                assert c.get("/api/v1/models/qwen3-8b", headers={"Connection": "close"}).status_code == 200
        assert len(hashes) == 1
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=20)


# ---------------------------------------------------------------------------- serve's settings and the container

def _instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    text = re.sub(r"\\\n", " ", "\n".join(l for l in dockerfile.splitlines() if not l.lstrip().startswith("#")))
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_keeps_its_promises():
    """What can be checked without a Docker daemon: slim base, store built at image build time, non-root
    user, health check on /healthz, `casebook serve` on 0.0.0.0 as entrypoint, run-time writes in /tmp."""
    steps = _instructions((ROOT / "Dockerfile").read_text(encoding="utf-8"))
    kinds = [k for k, _ in steps]
    assert steps[0] == ("FROM", "python:3.11-slim")
    build = [i for i, (k, a) in enumerate(steps) if k == "RUN" and "casebook build" in a]
    user = [i for i, (k, _) in enumerate(steps) if k == "USER"]
    assert len(build) == 1 and len(user) == 1
    assert build[0] < user[0] < kinds.index("ENTRYPOINT") and "RUN" not in kinds[user[0]:]
    assert steps[user[0]][1].split(":")[0] not in ("root", "0")
    assert "chmod -R a-w /app" in steps[build[0]][1]                 # the store and code are read-only
    health = next(a for k, a in steps if k == "HEALTHCHECK")
    assert "/healthz" in health and "CMD" in health
    assert json.loads(next(a for k, a in steps if k == "ENTRYPOINT")) == ["casebook", "serve", "--host", "0.0.0.0"]
    env = " ".join(a for k, a in steps if k == "ENV")
    for setting in ("CASEBOOK_BUILD=0", "CASEBOOK_RUNTIME_DIR=/tmp", "CASEBOOK_EXPORT_DIR=/tmp/"):
        assert setting in env
    ignored = {l.strip() for l in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()}
    assert {".git", ".venv", "var", "*.duckdb"} <= ignored
    for _, args in (s for s in steps if s[0] == "COPY"):
        for src in args.split()[:-1]:
            assert (ROOT / src).exists() and src.rstrip("/") not in ignored, src


def test_every_setting_is_documented_in_the_readme():
    """Each CASEBOOK_* variable api/settings.py reads appears in the README's Configuration section."""
    names = set(re.findall(r'"(CASEBOOK_[A-Z0-9_]+)"', (ROOT / "api" / "settings.py").read_text(encoding="utf-8")))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    assert {"CASEBOOK_MAX_HEADER_BYTES", "CASEBOOK_TRUST_PROXY_HEADERS"} <= names
    assert sorted(n for n in names if f"`{n}`" not in section) == []


def test_serve_settings_defaults_and_refusals(monkeypatch):
    from api.server import uvicorn_config
    from api.settings import Settings

    s = Settings()
    config = uvicorn_config(s, "127.0.0.1", 8000, 2)
    assert (config.server_header, config.proxy_headers, config.lifespan) == (False, False, "on")
    assert config.timeout_keep_alive == s.keep_alive_s and config.timeout_graceful_shutdown == s.graceful_shutdown_s
    assert config.h11_max_incomplete_event_size == s.max_header_bytes == 65536
    monkeypatch.setenv("CASEBOOK_TRUST_PROXY_HEADERS", "yes")
    monkeypatch.setenv("CASEBOOK_FORWARDED_ALLOW_IPS", "10.0.0.0/8")
    trusted = uvicorn_config(Settings(), "127.0.0.1", 8000, 1)
    assert trusted.proxy_headers and trusted.forwarded_allow_ips == "10.0.0.0/8"
    monkeypatch.setenv("CASEBOOK_TRUST_PROXY_HEADERS", "maybe")
    with pytest.raises(ValueError, match="CASEBOOK_TRUST_PROXY_HEADERS='maybe' is not a yes/no value"):
        Settings()

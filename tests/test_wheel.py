"""A built wheel works on its own, without the source tree (one slow integration test, ~30 s).

Every other test imports the editable install, which reads templates, static files, migrations and data files
straight from the checkout, so a wheel that lacks them would go unnoticed. This test:

1. copies the committed tree (`git archive HEAD`: untracked files and uncommitted edits stay out, as in a clean
   clone; outside a git checkout, the tree minus what .gitignore names) and builds the wheel from it with
   `pip wheel --no-deps` (the build backend, setuptools, comes from PyPI or pip's cache);
2. checks the wheel holds every file of the packages `api`, `calculators` and `knowledge` in that tree (so
   every sub-package with its __init__.py, the templates, static files, migrations and data files) and nothing else;
3. makes a fresh venv, installs the wheel with `--no-deps`, and reaches the dependencies through a `.pth` file
   naming a folder of links to this interpreter's site-packages minus the project's own editable install (its
   `__editable__*` finder, .pth and dist-info), so only the installed wheel can be imported;
4. from a temporary working directory: `casebook build` (the default store path of an installed wheel, in a
   temporary XDG_CACHE_HOME, never site-packages), then `casebook serve` on a free port: /healthz, one
   calculation as JSON and as Markdown, two HTML pages and the stylesheet; SIGTERM ends it with status 0.

Set CASEBOOK_WHEEL_SOURCE=worktree to build from the tracked files as they are in the work tree (`git ls-files`,
uncommitted edits included) instead of HEAD.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import site
import socket
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("api", "calculators", "knowledge")
DIST = "ai_infra_casebook"
#: files the service reads at run time, named here so that the comparison below cannot pass on an empty tree
RUNTIME_FILES = ("api/templates/base.html.j2", "api/templates/calculator.md.j2", "api/static/site.css",
                 "knowledge/migrations/0001_initial.sql", "knowledge/data/models.yaml",
                 "knowledge/data/derivations/kv_sizing.yaml", "knowledge/data/measured/NOTICE",
                 "knowledge/data/measured/manifest.yaml", "knowledge/data/model-configs/Qwen--Qwen3-8B_config.json",
                 "knowledge/DATA-FORMAT.md", "knowledge/records/__init__.py", "calculators/families/memory/__init__.py")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} exited {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return r


def _clean_copy(dest: Path) -> None:
    """The committed tree (or the tracked files of the work tree, or the tree minus .gitignore) into `dest`."""
    dest.mkdir()
    in_git = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-inside-work-tree"],
                            check=False, capture_output=True, text=True).stdout.strip() == "true"
    if in_git and os.environ.get("CASEBOOK_WHEEL_SOURCE") == "worktree":
        tracked = _run(["git", "-C", str(ROOT), "ls-files", "-z"]).stdout.split("\0")
        for rel in filter(None, tracked):
            if (ROOT / rel).is_file():                 # a file deleted but not yet staged is left out
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, dest / rel)
    elif in_git:
        tar = dest.parent / "head.tar"
        _run(["git", "-C", str(ROOT), "archive", "--format=tar", "-o", str(tar), "HEAD"])
        with tarfile.open(tar) as t:
            t.extractall(dest, filter="data")
    else:
        ignored = [l.strip().rstrip("/") for l in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
                   if l.strip() and not l.startswith("#")]
        shutil.copytree(ROOT, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git", *ignored))


def _deps_folder(folder: Path) -> Path:
    """Links to every entry of this interpreter's site-packages except the project itself (editable finder,
    its .pth, its dist-info, any copy of the packages): the dependencies, and only them."""
    folder.mkdir()
    for site_dir in site.getsitepackages():
        for entry in sorted(Path(site_dir).iterdir()):
            name = entry.name
            if (name.startswith(("__editable__", DIST, "__pycache__")) or name.endswith(".pth")
                    or name in PACKAGES or (folder / name).exists()):
                continue
            (folder / name).symlink_to(entry)
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tree(purelib: Path) -> set[str]:
    """The installed files (bytecode aside), to see that running the service writes nothing into site-packages."""
    return {p.relative_to(purelib).as_posix() for p in purelib.rglob("*") if "__pycache__" not in p.parts}


def test_built_wheel_installs_and_serves_without_the_source_tree(tmp_path):
    src = tmp_path / "src"
    _clean_copy(src)

    # ---- the wheel, and what it holds
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
          "--wheel-dir", str(tmp_path / "dist"), str(src)])
    (wheel,) = (tmp_path / "dist").glob(f"{DIST}-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    in_tree = {p.relative_to(src).as_posix() for top in PACKAGES for p in (src / top).rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    packages = sorted(p.parent.relative_to(src).as_posix() for top in PACKAGES for p in (src / top).rglob("__init__.py"))
    assert set(RUNTIME_FILES) <= in_tree and len(packages) >= 15, packages
    assert sorted(in_tree - names) == []                                   # every package, template, data file
    assert sorted(f"{p}/__init__.py" for p in packages if f"{p}/__init__.py" not in names) == []
    assert sorted(n for n in names - in_tree if not n.startswith(f"{DIST}-")) == []   # and nothing else
    version = wheel.name.split("-")[1]
    assert {n.split("/")[0] for n in names} == {*PACKAGES, f"{DIST}-{version}.dist-info"}

    # ---- a fresh venv with only the wheel and the dependencies
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
          "--disable-pip-version-check", "-q", str(wheel)])
    purelib = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    (purelib / "casebook-test-deps.pth").write_text(f"{_deps_folder(tmp_path / 'deps')}\n", encoding="utf-8")

    work = tmp_path / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CASEBOOK_", "PYTHON", "VIRTUAL_ENV", "XDG_"))}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", HOME=str(tmp_path / "home"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), CASEBOOK_RUNTIME_DIR=str(tmp_path),
               CASEBOOK_EXPORT_DIR=str(tmp_path / "export"), PYTHONDONTWRITEBYTECODE="1")
    probe = ("import json, sys, api, calculators, knowledge, knowledge.build, knowledge.migrate\n"
             "from api.site.render import STATIC, TEMPLATES\n"
             "print(json.dumps({'modules': [m.__file__ for m in (api, calculators, knowledge)],\n"
             "  'dirs': [str(TEMPLATES), str(STATIC), str(knowledge.migrate.MIGRATIONS_DIR)],\n"
             "  'default_db': str(knowledge.build.DEFAULT_DB), 'path': sys.path,\n"
             "  'editable': sorted(m for m in sys.modules if 'editable' in m)}))")
    seen = json.loads(_run([str(py), "-c", probe], cwd=work, env=env).stdout)
    for f in seen["modules"] + seen["dirs"]:
        assert Path(f).is_relative_to(purelib), (f, purelib)
    assert all(Path(d).is_dir() for d in seen["dirs"]), seen["dirs"]
    assert str(ROOT) not in seen["path"] and seen["editable"] == [], seen
    assert seen["default_db"] == str(tmp_path / "cache" / "casebook" / "casebook.duckdb")
    installed = _tree(purelib)

    # ---- build the store at its default place, serve it
    casebook = str(venv / "bin" / "casebook")
    built = _run([casebook, "build"], cwd=work, env=env)
    db = Path(seen["default_db"])
    assert db.is_file() and "case 71" in built.stdout, built.stdout
    port = _free_port()
    log = (tmp_path / "serve.log").open("w+")
    proc = subprocess.Popen([casebook, "serve", "--db", str(db), "--no-build", "--host", "127.0.0.1",
                             "--port", str(port), "--workers", "1", "--log-level", "warning"],
                            cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, f"casebook serve exited {proc.returncode}:\n{(tmp_path / 'serve.log').read_text()}"
            assert time.monotonic() < deadline, "casebook serve did not answer /healthz in 90 s"
            try:
                health = httpx.get(url + "/healthz", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        with httpx.Client(base_url=url, timeout=30) as c:
            assert health.status_code == 200 and health.json()["status"] == "ok", health.text
            body = json.dumps({"model": "qwen3-8b", "tokens": 8192})
            r = c.post("/api/v1/calculators/kv-cache", content=body, headers={"Content-Type": "application/json"})
            assert r.status_code == 200, r.text
            assert r.json()["outputs"]["bytes_per_token"] == 147456
            md = c.post("/api/v1/calculators/kv-cache", content=body,
                        headers={"Content-Type": "application/json", "Accept": "text/markdown"})
            assert md.status_code == 200 and md.headers["content-type"].startswith("text/markdown"), md.text
            assert "147456" in md.text.replace(",", "")                        # calculator.md.j2 rendered
            page = c.get("/calculators/kv-cache")
            assert page.status_code == 200 and "<html" in page.text and "KV cache" in page.text, page.text[:500]
            home = c.get("/")
            assert home.status_code == 200 and "AI Infra Casebook" in home.text
            css = c.get("/static/site.css")
            assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            status = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
        log.close()
    assert status == 0, (tmp_path / "serve.log").read_text()
    assert _tree(purelib) == installed                                    # nothing written into site-packages

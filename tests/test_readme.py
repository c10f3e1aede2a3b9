"""Every command in the README's ```bash blocks runs as written (issue #28: its POST examples sent a form and got 422).

Each command (continuation lines joined, comment lines dropped) is either run here or listed in NOT_RUN with the
reason; a command the README gains that is neither fails `test_every_command_is_run_here_or_listed`. The `curl`
ones go to the suite's live server (its port for the README's 8000) and must answer 2xx JSON or Markdown; the CLI
ones run as subprocesses from the checkout, on the suite's built store, and must exit 0.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
#: where the README's curl commands expect the service (`casebook serve`'s default)
README_HOST = "localhost:8000"
#: appended to each curl's output: the status and media type of its answer, after the body
STATUS_MARK = "\n<<readme-test %{http_code} %{content_type}>>"
#: a command that hangs fails instead of holding CI (not a speed check: each takes seconds)
HANG_S = 300


def commands(text: str) -> list[str]:
    """The commands of every ```bash block: lines ending in a backslash joined with the next, comment-only and blank
    lines dropped; each keeps its trailing comment (bash ignores it)."""
    found: list[str] = []
    for block in re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M):
        pending = ""
        for line in block.splitlines():
            if line.endswith("\\"):
                pending += line[:-1]
                continue
            line, pending = pending + line, ""
            if line.strip() and not line.lstrip().startswith("#"):
                found.append(line.strip())
        assert not pending, f"a ```bash block ends inside a continued line: {pending!r}"
    return found


def key(command: str) -> str:
    """A command as its shell words, comment dropped (how NOT_RUN names it)."""
    return " ".join(shlex.split(command, comments=True))


#: commands not run here, and why (keys as `key` writes them); every other command runs below
NOT_RUN = {
    "make run": "serves until stopped; tests/test_cli.py checks that make knows it",
    "make test": "the whole suite, which this test is part of (.ci/run runs it)",
    ".venv/bin/casebook serve --workers 2":
        "serves until stopped; tests/test_cli.py::test_serve_with_two_workers_shares_the_read_only_store starts it",
    ".venv/bin/casebook calibration":
        "about 6 s of CPU; tests/test_calibration.py::test_cli_prints_median_and_p90 runs the same command in-process",
    ".venv/bin/casebook import-measurements --wheel .cache/wheels/aiconfigurator_core-0.12.0-*.whl":
        "rewrites knowledge/data/measured/ in the checkout; tests/store/test_measurements.py re-imports the tables "
        "from the same wheel into a temporary directory and checks every hash",
    ".venv/bin/casebook validate": "computes the validation report (about 20 s of CPU); tests/test_cli_validate.py "
                                   "runs the same command on the suite's store",
    ".venv/bin/casebook import-models --wheel .cache/wheels/aiconfigurator_core-0.12.0-*.whl --dry-run":
        "tests/store/test_wheel_models.py runs the dry run against the same wheel",
    ".venv/bin/python benchmarks/bench_calculators.py": "a benchmark: minutes of timing, no check",
    "benchmarks/load.sh 60": "a 60 s load run with wrk against two workers",
    ".venv/bin/python benchmarks/bench_measured.py": "a benchmark: minutes of timing, no check",
    ".venv/bin/python benchmarks/bench_planner.py": "a benchmark: minutes of timing, no check",
    ".venv/bin/python benchmarks/mcp_questions.py":
        "starts its own server; tests/api/test_mcp_questions.py asks the same ten questions",
    ".venv/bin/python benchmarks/mutation_check.py": "tests/test_mutation_check.py runs the mutation check",
    ".venv/bin/pip install -e .[bench] && .venv/bin/python benchmarks/bench_grid.py":
        "installs the benchmark extras from PyPI (network), then a benchmark",
    ".venv/bin/python benchmarks/bench_limits.py": "a benchmark: the cost-model calibration, minutes",
    ".venv/bin/python benchmarks/bench_memory.py": "a benchmark: 10,000 requests to measure memory",
    ".venv/bin/python benchmarks/aiconfigurator_validation.py":
        "a comparison: installs aiconfigurator 0.12.0 into its own venv and estimates ~40 points (minutes)",
    ".venv/bin/python -m tests.site.screenshots":
        "writes screenshots with Chromium; tests/site/test_browser.py takes them in the suite",
}

#: the CLI commands run here: `casebook` sub-commands and python modules
CLI_SUBCOMMANDS = ("calc", "build", "coverage")
PYTHON_MODULES = ("knowledge.derivations",)

COMMANDS = commands(README.read_text(encoding="utf-8"))


def kind(command: str) -> str | None:
    """How a command is run here: "curl" (against the live server), "cli" (a subprocess), None (not at all)."""
    words = shlex.split(command, comments=True)
    if key(command) in NOT_RUN:
        return None
    if words[0] == "curl" and README_HOST in command:
        return "curl"
    if words[0] == ".venv/bin/casebook" and len(words) > 1 and words[1] in CLI_SUBCOMMANDS:
        return "cli"
    if words[:2] == [".venv/bin/python", "-m"] and len(words) > 2 and words[2] in PYTHON_MODULES:
        return "cli"
    return None


RUN = [c for c in COMMANDS if kind(c)]


def test_every_command_is_run_here_or_listed():
    assert len(COMMANDS) >= 20 and any(kind(c) == "curl" for c in COMMANDS) and any(kind(c) == "cli" for c in COMMANDS)
    unclassified = [c for c in COMMANDS if kind(c) is None and key(c) not in NOT_RUN]
    assert not unclassified, ("README commands neither run by tests/test_readme.py nor listed in its NOT_RUN with a "
                              f"reason: {unclassified}")
    stale = sorted(set(NOT_RUN) - {key(c) for c in COMMANDS})
    assert not stale, f"NOT_RUN lists commands the README no longer has: {stale}"


def test_post_examples_send_json():
    """curl -d without a JSON Content-Type sends a form, which the API refuses (415)."""
    for command in COMMANDS:
        words = shlex.split(command, comments=True)
        if words[0] == "curl" and any(w in ("-d", "--data", "--data-binary", "--data-raw") for w in words):
            assert "Content-Type: application/json" in words, command


def _env(built_db: Path) -> dict[str, str]:
    hosts = "127.0.0.1,localhost"
    return {**os.environ, "CASEBOOK_DB": str(built_db), "NO_PROXY": hosts, "no_proxy": hosts}


@pytest.fixture(scope="module")
def answers(live_server, built_db) -> dict[str, tuple[subprocess.CompletedProcess, str]]:
    """Every command run: {command: (the finished process, the command as run)}."""
    assert shutil.which("curl"), "curl is needed on PATH (.ci/run installs it)"
    host = live_server.removeprefix("http://")
    done = {}
    for command in RUN:
        ran = command
        if kind(command) == "curl":
            ran = command.replace(README_HOST, host).replace("curl ", f"curl -w {shlex.quote(STATUS_MARK)} ", 1)
        done[command] = (subprocess.run(["bash", "-c", ran], cwd=ROOT, env=_env(built_db), capture_output=True,
                                        text=True, timeout=HANG_S), ran)
    return done


@pytest.mark.parametrize("command", RUN, ids=[f"{i}-{key(c)[:40]}" for i, c in enumerate(RUN)])
def test_command_runs_as_written(answers, command):
    proc, ran = answers[command]
    assert proc.returncode == 0, f"{ran}\nexit {proc.returncode}\n{proc.stderr[-2000:]}"
    if kind(command) == "cli":
        assert proc.stdout.strip(), f"{ran} printed nothing"
        return
    body, _, mark = proc.stdout.rpartition("\n<<readme-test ")
    status, _, media = mark.removesuffix(">>").partition(" ")
    assert status.startswith("2"), f"{ran}\nHTTP {status}: {body[:1000]}"
    if media.startswith("application/json"):
        assert isinstance(json.loads(body), (dict, list)), body[:500]
    else:
        assert media.startswith("text/markdown") and re.search(r"^# ", body, re.M), f"{media}: {body[:500]}"

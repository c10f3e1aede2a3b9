"""Benchmark points (knowledge/data/benchmarks/): every validation rule refuses a fixture naming file, id and field;
a good fixture builds into the `benchmark` table with its flat columns; the real store keeps the invariants."""
from __future__ import annotations

import json

import duckdb
import pytest

from knowledge import records as R
from knowledge.build import BuildError, build
from tests.store.test_build import _private_copy, make_data, problems_of

BENCH_SOURCES = """
- id: src-a
  title: A datasheet
  url: https://example.org/a.pdf
  kind: datasheet
- id: bench-src
  title: A benchmark report
  url: https://example.org/bench
  kind: report
"""

POINT = """
- id: tiny-gpux-vllm-tp2-c8
  source: bench-src
  url: https://example.org/bench/results.json
  locator: "entry conc=8 isl=1024 osl=128"
  date: "2025-10-09"
  model: tiny-1b
  model_hf: acme/Tiny-1B-Instruct
  hardware: gpu-x
  hardware_name: "Acme GPU X 80GB"
  devices: 2
  framework: vllm
  framework_version: "0.10.2"
  weight_format: bf16
  kv_format: null
  tp: 2
  pp: 1
  ep: 1
  dp_attention: false
  replicas: 1
  input_tokens: 1024
  output_tokens: 128
  dataset: random
  load: {concurrency: 8}
  config: {max_num_seqs: 256}
  measured:
    ttft_s: {mean: 0.5, median: 0.4, p99: 1.9}
    tpot_s: {mean: 0.02, median: 0.019}
    e2e_s: {mean: 3.1}
    output_tokens_per_s: 400.0
    output_tokens_per_s_per_device: 200.0
    requests_per_s: 2.5
  as_published: "conc 8: 200 tok/s/gpu, median TPOT 19 ms, median TTFT 400 ms"
- id: tiny-gpux-other-offline
  source: bench-src
  url: https://example.org/bench/offline.html
  locator: "Table 2, row 1"
  date: "2025-09"
  model: null
  model_hf: acme/Tiny-1B-Instruct
  hardware: null
  hardware_name: "Acme GPU Y"
  devices: 8
  framework: other
  framework_name: "Acme Serve"
  framework_version: null
  weight_format: fp8
  kv_format: fp8
  tp: 8
  input_tokens: 219.5
  output_tokens: 180.2
  dataset: sharegpt
  load: {offline: true}
  measured:
    output_tokens_per_s: 9000.0
  as_published: "9,000 tokens/s"
- id: tiny-gpux-sglang-server
  source: bench-src
  url: https://example.org/bench/server.html
  locator: "Table 3"
  date: "2025"
  model: tiny-1b
  model_hf: acme/Tiny-1B-Instruct
  hardware: gpu-x
  hardware_name: "Acme GPU X 80GB"
  devices: 4
  framework: sglang
  framework_version: null
  weight_format: fp8
  kv_format: null
  tp: 4
  ep: null
  dp_attention: true
  input_tokens: null
  output_tokens: 300
  dataset: mlperf-openorca
  load: {server_scenario: true, target_qps: 3.5, ttft_limit_s: 2.0, tpot_limit_s: 0.2}
  measured:
    requests_per_s: 3.4
    tpot_s: {mean: 0.15, p99: 0.19}
  as_published: "3.4 samples/s"
  note: "mean input length not printed"
"""


def data_with(tmp_path, points: str = POINT):
    data = make_data(tmp_path, **{"sources.yaml": BENCH_SOURCES})
    (data / "benchmarks").mkdir()
    (data / "benchmarks" / "acme.yaml").write_text(points, encoding="utf-8")
    return data


def test_good_points_have_no_problems(tmp_path):
    assert problems_of(data_with(tmp_path)) == []


#: (what to replace in POINT, by what, the problem expected: file, id, field, message)
BAD = [
    ("  locator: \"entry conc=8 isl=1024 osl=128\"\n", "",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: locator: required field is missing"),
    ("  as_published: \"conc 8", "  as_publishd: \"conc 8",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: as_publishd: unknown field"),
    ("  load: {concurrency: 8}", "  load: {concurrency: 8, requests_per_s: 2.0}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: load: exactly one of concurrency, requests_per_s"),
    ("  load: {concurrency: 8}", "  load: {}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: load: exactly one of"),
    ("  load: {concurrency: 8}", "  load: {offline: false}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: load.offline: write offline: true"),
    ("  load: {concurrency: 8}", "  load: {concurrency: 0}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: load.concurrency: impossible value"),
    ("ttft_s: {mean: 0.5, median: 0.4, p99: 1.9}", "ttft_s: {mean: 500, median: 400, p99: 19000}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.ttft_s.p99: impossible value: 19000 s is not below"),
    ("tpot_s: {mean: 0.02, median: 0.019}", "tpot_s: {mean: 20.0, median: 19.0}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.tpot_s.mean: impossible value"),
    ("tpot_s: {mean: 0.02, median: 0.019}", "tpot_s: {mean: 0.0, median: 0.019}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.tpot_s.mean: impossible value: a latency in seconds must be > 0"),
    ("tpot_s: {mean: 0.02, median: 0.019}", "tpot_ms: {mean: 20.0}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.tpot_ms: milliseconds"),
    ("tpot_s: {mean: 0.02, median: 0.019}", "tpot: {mean: 0.02}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.tpot: unit missing"),
    ("tpot_s: {mean: 0.02, median: 0.019}", "tpot_s: {mean: 0.02, p50: 0.019}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.tpot_s.p50: write the 50th percentile as `median`"),
    ("ttft_s: {mean: 0.5, median: 0.4, p99: 1.9}", "ttft_s: {mean: 0.5, median: 2.4, p99: 1.9}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.ttft_s.p99: p99 (1.9) is below median (2.4)"),
    ("    requests_per_s: 2.5", "    requests_per_s: -2.5",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.requests_per_s: impossible value"),
    ("    output_tokens_per_s: 400.0", "    output_tokens_per_s: 0",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.output_tokens_per_s: impossible value"),
    ("    output_tokens_per_s_per_device: 200.0", "    output_tokens_per_s_per_device: 300.0",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.output_tokens_per_s_per_device: 300.0 x 2 devices"),
    ("  source: bench-src\n  url: https://example.org/bench/results.json",
     "  source: no-such-source\n  url: https://example.org/bench/results.json",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: source: reference to unknown source 'no-such-source'"),
    ("  model: tiny-1b", "  model: tiny-2b",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: model: reference to unknown model 'tiny-2b'"),
    ("  hardware: gpu-x", "  hardware: gpu-z",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: hardware: reference to unknown hardware 'gpu-z'"),
    ("  framework: vllm", "  framework: lmdeploy",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: framework: must be one of 'vllm', 'sglang', 'trtllm' or 'other'"),
    ("  framework_name: \"Acme Serve\"\n", "",
     "benchmarks/acme.yaml: tiny-gpux-other-offline: framework_name: framework: other needs the framework's name"),
    ("- id: tiny-gpux-other-offline", "- id: tiny-gpux-vllm-tp2-c8",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: id: duplicate id 'tiny-gpux-vllm-tp2-c8'"),
    ("- id: tiny-gpux-other-offline", "- id: Tiny_Offline",
     "benchmarks/acme.yaml: Tiny_Offline: id: id 'Tiny_Offline' is not a lowercase slug"),
    ("  devices: 2\n", "  devices: 4\n",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: devices: 4 devices, but tp x pp x replicas = 2 x 1 x 1 = 2"),
    ("  ep: 1\n", "  ep: 4\n",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: ep: expert parallelism 4 is more than the 2 devices"),
    ("  input_tokens: 1024", "  input_tokens: 0",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: input_tokens: impossible value"),
    ("  date: \"2025-10-09\"", "  date: \"Oct 2025\"",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: date: a date is YYYY, YYYY-MM or YYYY-MM-DD"),
    ("  url: https://example.org/bench/results.json", "  url: results.json",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: url: must be an http(s) URL"),
    ("  model_hf: acme/Tiny-1B-Instruct\n  hardware: gpu-x", "  model_hf: Tiny-1B\n  hardware: gpu-x",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: model_hf: a Hugging Face repository is owner/name"),
    ("    e2e_s: {mean: 3.1}", "    e2e_s: {mean: 0.3}",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: measured.ttft_s.mean: mean TTFT 0.5 s exceeds mean E2E 0.3 s"),
    ("    output_tokens_per_s: 9000.0", "    tokens: 9000.0",
     "benchmarks/acme.yaml: tiny-gpux-other-offline: measured.tokens: unit missing"),
    ("  load: {offline: true}", "  load: {offline: true, tpot_limit_s: 0.05}",
     "benchmarks/acme.yaml: tiny-gpux-other-offline: load.tpot_limit_s: a target rate or latency limit belongs to a server"),
    ("  load: {offline: true}", "  load: {server_scenario: true, target_qps: 2.0, ttft_limit_s: 2000000}",
     "benchmarks/acme.yaml: tiny-gpux-other-offline: load.ttft_limit_s: impossible value"),
    ("  input_tokens: 219.5", "  input_tokens: null",
     "benchmarks/acme.yaml: tiny-gpux-other-offline: input_tokens: null (not printed by the source) needs a note"),
    ("  output_tokens: 128\n", "",
     "benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: output_tokens: required field is missing"),
]


@pytest.mark.parametrize("old, new, expected", BAD, ids=[b[2].split(": ", 2)[2][:40] for b in BAD])
def test_each_rule_refuses_a_bad_point_naming_file_id_and_field(tmp_path, old, new, expected):
    assert old in POINT, old
    found = problems_of(data_with(tmp_path, POINT.replace(old, new, 1)))
    assert any(p.startswith(expected) for p in found), found


def test_a_bad_point_fails_the_build(tmp_path):
    data = data_with(tmp_path, POINT.replace("  devices: 2\n", "  devices: 3\n", 1))
    with pytest.raises(BuildError, match="benchmarks/acme.yaml: tiny-gpux-vllm-tp2-c8: devices"):
        build(tmp_path / "x.duckdb", data)


def test_points_build_into_the_benchmark_table_with_flat_columns(tmp_path):
    db = tmp_path / "x.duckdb"
    counts = build(db, data_with(tmp_path))
    assert counts["benchmark"] == 3
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.execute("SELECT * FROM benchmark ORDER BY id")
        names = [d[0] for d in con.description]
        rows = [dict(zip(names, r)) for r in con.fetchall()]
    finally:
        con.close()
    other, server, vllm = rows
    assert (server["load_kind"], server["requests_per_s_offered"], server["input_tokens"], server["dp_attention"]) == (
        "server_scenario", 3.5, None, True)
    assert (vllm["load_kind"], vllm["concurrency"], vllm["offline"], vllm["requests_per_s_offered"]) == ("concurrency", 8, False, None)
    assert (vllm["ttft_median_s"], vllm["ttft_p99_s"], vllm["tpot_median_s"], vllm["e2e_mean_s"]) == (0.4, 1.9, 0.019, 3.1)
    assert (vllm["itl_mean_s"], vllm["output_tokens_per_s_per_device"], vllm["requests_per_s"]) == (None, 200.0, 2.5)
    assert (vllm["devices"], vllm["tp"], vllm["model"], vllm["hardware"], vllm["input_tokens"]) == (2, 2, "tiny-1b", "gpu-x", 1024.0)
    assert json.loads(vllm["config_json"]) == {"max_num_seqs": 256}
    assert json.loads(vllm["measured_json"])["tpot_s"] == {"mean": 0.02, "median": 0.019}
    assert json.loads(vllm["doc"])["as_published"] == vllm["as_published"]
    assert (other["load_kind"], other["offline"], other["model"], other["pp"], other["input_tokens"]) == ("offline", True, None, 1, 219.5)


# ---------------------------------------------------------------------------- the real store

@pytest.fixture(scope="module")
def real(built_db, tmp_path_factory):
    con = duckdb.connect(str(_private_copy(built_db, tmp_path_factory.mktemp("bench"))), read_only=True)
    try:
        con.execute("SELECT * FROM benchmark")
        names = [d[0] for d in con.description]
        rows = [dict(zip(names, r)) for r in con.fetchall()]
        sources = {r[0]: r[1] for r in con.execute("SELECT id, url FROM source").fetchall()}
        models = {r[0] for r in con.execute("SELECT id FROM model").fetchall()}
        hardware = {r[0] for r in con.execute("SELECT id FROM hardware").fetchall()}
    finally:
        con.close()
    return rows, sources, models, hardware


def test_the_real_store_holds_points_that_resolve(real):
    rows, sources, models, hardware = real
    assert rows, "no benchmark point stored"
    for r in rows:
        assert r["source"] in sources, r["id"]
        assert r["model"] is None or r["model"] in models, r["id"]
        assert r["hardware"] is None or r["hardware"] in hardware, r["id"]
        assert r["url"].startswith(("https://", "http://")) and r["locator"], r["id"]
        assert r["framework"] in R.BENCHMARK_FRAMEWORKS, r["id"]
        assert r["load_kind"] in ("concurrency", "requests_per_s", "offline", "server_scenario"), r["id"]


def test_the_real_points_keep_the_invariants(real):
    rows = real[0]
    for r in rows:
        if not r["dp_attention"]:
            assert r["devices"] == r["tp"] * r["pp"] * r["replicas"], r["id"]
        assert r["ep"] is None or r["ep"] <= r["devices"], r["id"]
        for col in [c for c in r if c.endswith("_s") and not c.endswith("_per_s")]:
            assert r[col] is None or 0 < r[col] < 1e4, (r["id"], col)
        for col in [c for c in r if c.endswith("_per_s")]:
            assert r[col] is None or r[col] > 0, (r["id"], col)
        figures = json.loads(r["measured_json"])
        assert figures, r["id"]
        doc = json.loads(r["doc"])
        assert doc["id"] == r["id"] and doc["as_published"] == r["as_published"]

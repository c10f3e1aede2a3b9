"""knowledge.import_inferencex: InferenceX fixture entries become benchmark records by stated rules (the fixture itself
is never committed, so these entries are written here in its shape)."""
from __future__ import annotations

import copy

import orjson
import pytest
import yaml

from knowledge import import_inferencex as IX

URL = "https://github.com/example/InferenceX-app/blob/0000000/packages/app/cypress/fixtures/api/benchmarks.json"


def entry(**over) -> dict:
    conc, osl, tp = over.get("conc", 16), over.get("osl", 1024), over.get("decode_tp", 8)
    e2e = 20.0
    # figures that agree with Little's law: conc ÷ E2E × mean OSL (0.9 × nominal) = TP × per-GPU output tokens/s
    out_gpu = conc / e2e * osl * 0.9 / tp
    e = {"hardware": "h200", "framework": "sglang", "model": "dsr1", "precision": "fp8", "spec_method": "none",
         "disagg": False, "is_multinode": False, "prefill_tp": tp, "prefill_ep": 1, "prefill_dp_attention": False,
         "prefill_num_workers": 0, "decode_tp": tp, "decode_ep": 1, "decode_dp_attention": False,
         "decode_num_workers": 0, "num_prefill_gpu": tp, "num_decode_gpu": tp, "isl": 1024, "osl": osl, "conc": conc,
         "image": "lmsysorg/sglang:v0.5.12-cu130",
         "metrics": {"mean_tpot": 0.02, "median_tpot": 0.021, "p99_tpot": 0.03, "mean_ttft": 0.4, "median_ttft": 0.3,
                     "p90_ttft": 0.6, "p99_ttft": 1.2, "mean_itl": 0.02, "median_itl": 0.019, "p99_itl": 0.05,
                     "mean_e2el": e2e, "median_e2el": 19.0, "output_tput_per_gpu": out_gpu,
                     "tput_per_gpu": 2 * out_gpu},
         "date": "2026-05-01", "run_url": "https://github.com/SemiAnalysisAI/InferenceX/actions/runs/1/attempts/1"}
    metrics = over.pop("metrics", None)
    e.update(over)
    if metrics:
        e["metrics"].update(metrics)
    return e


def test_an_entry_becomes_a_record_with_its_figures_and_provenance():
    r = IX.record_of(entry(), URL)
    assert r["id"] == "inferencex-dsr1-fp8-h200-sglang-tp8-ep1-c16-1k1k-20260501"
    assert (r["hardware"], r["framework"], r["framework_version"], r["model"]) == ("h200-sxm", "sglang", "0.5.12", "deepseek-r1")
    assert (r["url"], r["source"]) == (URL, IX.SOURCE)
    assert "conc=16" in r["locator"] and "run_url=https://github.com/SemiAnalysisAI" in r["locator"]
    assert r["measured"]["tpot_s"] == {"mean": 0.02, "median": 0.021, "p99": 0.03}
    assert r["measured"]["ttft_s"]["p90"] == 0.6
    assert r["measured"]["output_tokens_per_s"] == pytest.approx(8 * r["measured"]["output_tokens_per_s_per_device"], rel=1e-6)
    assert r["load"] == {"concurrency": 16} and r["config"]["random_range_ratio"] == 0.8


def test_the_gpu_count_is_the_decode_tp_not_the_apis_tp_times_ep():
    r = IX.record_of(entry(decode_ep=8, num_decode_gpu=64), URL)
    assert (r["devices"], r["tp"], r["ep"]) == (8, 8, 8)


@pytest.mark.parametrize("image, version", [
    ("lmsysorg/sglang:v0.5.10.post1-cu130", "0.5.10.post1"),
    ("lmsysorg/sglang:v0.5.9-rocm700-mi30x", "0.5.9"),
    ("nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc14", "1.3.0rc14"),
    ("rocm/atom:rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3",
     "0.1.3 (rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom0.1.3)"),
    (None, None),
])
def test_the_framework_version_is_the_image_tag(image, version):
    assert IX.version_of(image) == version


def test_multi_node_disaggregated_and_unmapped_entries_are_left_out():
    assert IX.record_of(entry(disagg=True), URL) is None
    assert IX.record_of(entry(is_multinode=True), URL) is None
    assert IX.record_of(entry(hardware="tpu9"), URL) is None


def test_one_record_per_configuration_the_newest_run_kept():
    old, new = entry(date="2026-02-01"), entry(date="2026-05-20")
    other = entry(conc=32)
    records, left = IX.merge([], [([old, other], URL), ([new], URL)])
    assert [r["date"] for r in records] == ["2026-05-20", "2026-05-01"]
    assert left["an older run of a configuration kept at its newest"] == 1


def test_entries_whose_figures_contradict_each_other_are_left_out_and_counted():
    bad_little = entry(metrics={"output_tput_per_gpu": 10 * entry()["metrics"]["output_tput_per_gpu"]})
    bad_itl = entry(conc=64, metrics={"mean_itl": 12.0})
    records, left = IX.merge([], [([bad_little, bad_itl, entry(conc=8)], URL)])
    assert [r["load"]["concurrency"] for r in records] == [8]
    assert sum(n for why, n in left.items() if why.startswith("figures that contradict")) == 2


def test_the_script_writes_the_records_and_rerunning_it_changes_nothing(tmp_path):
    fixture = tmp_path / "benchmarks.json"
    fixture.write_bytes(orjson.dumps([entry(), entry(decode_ep=8, num_decode_gpu=64, conc=64), entry(disagg=True)]))
    out = tmp_path / "inferencex.yaml"
    assert IX.main(["--snapshot", str(fixture), URL, "--out", str(out)]) == 0
    records = yaml.safe_load(out.read_text())
    assert len(records) == 2
    again = copy.deepcopy(records)
    assert IX.main(["--snapshot", str(fixture), URL, "--out", str(out)]) == 0     # idempotent over its own output
    assert yaml.safe_load(out.read_text()) == again


def test_the_stored_inferencex_points_follow_the_rules():
    from knowledge.loader import DATA_DIR

    records = yaml.safe_load((DATA_DIR / "benchmarks" / "inferencex.yaml").read_text())
    keys = [IX.config_key(r) for r in records]
    assert len(keys) == len(set(keys)), "a configuration stored twice"
    for r in records:
        assert r["devices"] == r["tp"], r["id"]
        if "kv_cache_dtype" in r["config"]:
            assert r["kv_format"] == IX.KV_FORMATS[r["config"]["kv_cache_dtype"]], r["id"]
            assert r["config"]["launch_scripts"]["paths"] and len(r["config"]["launch_scripts"]["commit"]) == 40
        m = r["measured"]
        if m.get("output_tokens_per_s_per_device") and (m.get("e2e_s") or {}).get("mean"):
            little = r["load"]["concurrency"] / m["e2e_s"]["mean"] * r["output_tokens"] * 0.9 / r["tp"]
            assert abs(m["output_tokens_per_s_per_device"] / little - 1) <= 0.25, r["id"]


def _record(**over) -> dict:
    r = IX.record_of(entry(**over), URL)
    assert r is not None
    return r


def test_the_launch_scripts_of_a_configuration_are_found_by_name():
    names = ["benchmarks/dsr1_fp8_h200_slurm.sh", "benchmarks/dsr1_fp8_h200_docker.sh", "benchmarks/dsr1_fp8_h200_trt.sh",
             "benchmarks/dsr1_fp8_h200_mtp.sh", "benchmarks/dsr1_fp8_h200_sglang-disagg.sh",
             "benchmarks/single_node/agentic/dsr1_fp8_h200.sh",
             "benchmarks/multi_node/dsr1_fp8_h200.sh", "benchmarks/dsr1_fp4_h200.sh", "benchmarks/dsr1_fp8_h2000.sh",
             "runners/dsr1_fp8_h200.sh"]
    assert IX.scripts_for(_record(), names) == ["benchmarks/dsr1_fp8_h200_docker.sh", "benchmarks/dsr1_fp8_h200_slurm.sh"]
    assert IX.scripts_for(_record(framework="trt"), names) == ["benchmarks/dsr1_fp8_h200_trt.sh"]
    assert IX.scripts_for(_record(spec_method="mtp"), names) == ["benchmarks/dsr1_fp8_h200_mtp.sh"]


@pytest.mark.parametrize("text, framework, value", [
    ("python3 -m sglang.launch_server --tp 8 --kv-cache-dtype fp8_e4m3 --disable-radix-cache", "sglang", "fp8_e4m3"),
    ("python3 -m sglang.launch_server --kv-cache-dtype=fp8_e4m3", "sglang", "fp8_e4m3"),
    ("python3 -m sglang.launch_server --tp 8 --mem-fraction-static 0.82", "sglang", "auto"),
    ("cat > cfg.yml << EOF\nkv_cache_config:\n  free_gpu_memory_fraction: 0.75\n  dtype: fp8\nEOF\n", "trtllm", "fp8"),
    ("trtllm-serve $MODEL --tp_size=8", "trtllm", None),
])
def test_the_kv_cache_dtype_is_read_from_the_script_as_written(text, framework, value):
    assert IX.kv_dtype_of(text, framework) == value


@pytest.mark.parametrize("text, per_user", [
    ('    --num-prompts "$((CONC * 10))" \\', 10),
    ("--num-prompts $(( $CONC * 10 )) --max-concurrency $CONC", 10),
    ("--num-prompts=$(( $CONC * 20 ))", 20),
    ("--num-prompts $((4 * CONC))", 4),
    ("--num-prompts $CONC --max-concurrency $CONC", 1),
    ('--num-prompts "$NUM_PROMPTS"', None),
    ("--num-prompts -1", None),
    ("--num-prompts $((CONC * 10))\n--num-prompts $((CONC * 20))", None),     # two counts: no single answer
    ("python3 -m sglang.launch_server --tp 8", None),
])
def test_the_prompt_count_is_read_from_the_script_as_written(text, per_user):
    assert IX.prompts_per_user_of(text) == per_user


def test_each_record_takes_the_kv_dtype_its_scripts_set_on_its_run_date(tmp_path):
    import subprocess

    repo = tmp_path / "ix"
    (repo / "benchmarks").mkdir(parents=True)

    def commit(text: str, date: str) -> None:
        (repo / "benchmarks" / "dsr1_fp8_h200_slurm.sh").write_text(text)
        env = {"GIT_AUTHOR_DATE": f"{date}T12:00:00", "GIT_COMMITTER_DATE": f"{date}T12:00:00",
               "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
               "PATH": __import__("os").environ["PATH"]}
        subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True, env=env)
        subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", date], check=True, env=env)

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commit("python3 -m sglang.launch_server --tp 8\n", "2026-01-10")
    commit("python3 -m sglang.launch_server --tp 8 --kv-cache-dtype fp8_e4m3\n"
           'run_benchmark_serving --num-prompts "$((CONC * 10))" --max-concurrency "$CONC"\n', "2026-03-10")
    early, late, before = _record(date="2026-02-01"), _record(date="2026-04-01", conc=32), _record(date="2025-12-01", conc=8)
    said = IX.with_launch_config([early, late, before], repo)
    assert (early["kv_format"], early["config"]["kv_cache_dtype"]) == ("bf16", "auto")
    assert (late["kv_format"], late["config"]["kv_cache_dtype"]) == ("fp8", "fp8_e4m3")
    assert late["config"]["launch_scripts"]["paths"] == ["benchmarks/dsr1_fp8_h200_slurm.sh"]
    assert before["kv_format"] is None and "kv_cache_dtype" not in before["config"]   # no script yet on its date
    # the prompt count: the March script sends 10 per user; the January one states none
    assert late["config"]["num_prompts"] == 320 and "CONC × 10" in late["config"]["num_prompts_rule"]
    assert "num_prompts" not in early["config"] and "num_prompts" not in before["config"]
    # every record is counted once for its KV dtype (or the lack of a commit) and once for its prompt count
    assert said["no commit of the scripts repository before the run date"] == 1
    assert said["num_prompts = CONC × 10 from the launch scripts"] == 1
    assert said["no single prompt count in the launch scripts"] == 1
    assert sum(said.values()) == 5


SCRIPT = """
if [[ "$MODEL" != /* ]]; then hf download "$MODEL"; fi
MOE_BACKEND="TRTLLM"
if [[ "$ISL" == "1024" && "$OSL" == "8192" ]]; then
    if [[ $CONC -ge 256 ]]; then
        MOE_BACKEND="DEEPGEMM"   # large batches
    elif [[ $CONC -ge 128 ]]; then
        PIECEWISE="true"
    fi
fi
if [[ "$DP_ATTENTION" == "true" ]]; then
    MOE_BACKEND="CUTLASS"
fi
"""


def _env(**over):
    return {"ISL": "1024", "OSL": "8192", "CONC": "32", "TP": "8", "EP_SIZE": "1", "DP_ATTENTION": "false", **over}


@pytest.mark.parametrize("env, value", [
    (_env(), "TRTLLM"),
    (_env(CONC="256"), "DEEPGEMM"),
    (_env(CONC="512", OSL="1024"), "TRTLLM"),
    (_env(DP_ATTENTION="true"), "CUTLASS"),
    (_env(CONC="256", DP_ATTENTION="true"), "CUTLASS"),     # the later block wins, as bash runs them
])
def test_the_moe_backend_follows_the_scripts_conditions_for_the_configuration(env, value):
    assert IX.moe_backend_of(SCRIPT, env) == value


def test_a_backend_set_under_a_test_it_cannot_read_is_not_guessed():
    unread = SCRIPT.replace('[[ "$DP_ATTENTION" == "true" ]]', '[ -n "$SLURM_JOB_ID" ]')
    assert IX.moe_backend_of(unread, _env()) is None
    assert IX.moe_backend_of(SCRIPT, {k: v for k, v in _env().items() if k != "CONC"}) is None   # a missing input
    assert IX.moe_backend_of("moe_config:\n    backend: CUTLASS\n", _env()) == "CUTLASS"
    assert IX.moe_backend_of("trtllm-serve $MODEL\n", _env()) is None
    assert IX.script_env(_record(conc=32))["CONC"] == "32"


def test_a_trtllm_run_launched_with_the_generated_moe_kernels_asks_for_them(lookup):
    from calculators.families.serving._benchmark_points import request_of

    point = {"id": "x", "source": "s", "model": "deepseek-r1", "hardware": "b200-sxm", "framework": "trtllm",
             "tp": 8, "pp": 1, "ep": 1, "replicas": 1, "weight_format": "fp8", "kv_format": "fp8",
             "input_tokens": 1024, "output_tokens": 1024, "dataset": "random", "load": {"concurrency": 4},
             "config": {"moe_backend": "TRTLLM"}}
    body, kind, mapping = request_of(point, lookup)
    assert body["moe_kernel"] == "trtllm" and any("TRTLLM" in m for m in mapping)
    body, _, _ = request_of({**point, "config": {"moe_backend": "DEEPGEMM"}}, lookup)
    assert "moe_kernel" not in body

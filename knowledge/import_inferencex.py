"""InferenceX benchmark snapshots → benchmark records (knowledge/data/benchmarks/inferencex.yaml), issue #25 item 3.

InferenceX (SemiAnalysis) publishes its nightly serving runs through an API whose recorded responses the InferenceX-app
repository keeps as Cypress fixtures (`packages/app/cypress/fixtures/api/benchmarks.json`). Each entry is one run:
hardware, framework, precision, prefill/decode TP/EP/attention-DP, ISL/OSL, max concurrency, container image, date,
the GitHub Actions run that measured it, and its metrics (seconds; tokens/s per GPU).

What this converts, and how:
- single-node, aggregated runs only (`disagg` and `is_multinode` false): the estimate has no model of disaggregated
  prefill/decode; the count of entries left out is printed;
- every framework InferenceX runs single-node (SGLang, TensorRT-LLM, vLLM, AMD ATOM); ATOM and MTP runs are stored and
  listed by the validation as not compared, with the reason;
- one record per configuration (hardware, framework, precision, speculative method, TP, EP, attention DP, ISL, OSL,
  concurrency): the newest run over all snapshots given and the records already in the file, so a configuration
  measured on several nights counts once, at its newest software;
- the framework version is the tag of the container image (`lmsysorg/sglang:v0.5.12-cu130` → 0.5.12); a run without
  an image has no version;
- the GPU count is the decode TP: the API's `num_decode_gpu` is TP × EP for expert-parallel runs (64 for TP 8 × EP 8
  on one 8-GPU node), while its per-GPU figures divide by TP (Little's law on concurrency, E2E and mean output length
  gives TP × the per-GPU figure on every single-node entry);
- output tokens/s are InferenceX's per-GPU figure times the GPU count (the record says it is derived);
- an entry is left out, and counted, when its figures contradict each other or the store's plausibility rules: output
  tokens/s more than 25 % from Little's law (concurrency ÷ mean E2E × mean output length), or an ITL over 10 s.

With `--scripts REPO` (a git copy of SemiAnalysisAI/InferenceX, whose `benchmarks/` hold the launch script of every
configuration), each SGLang and TensorRT-LLM record also gets the KV-cache dtype its launch script set on the run's
date: the repository's last commit before the end of that day, the single-node scripts named
`dsr1_<precision>_<hardware>[_trt][_mtp]…sh` (every variant, docker or slurm, must agree, else nothing is recorded),
SGLang's `--kv-cache-dtype` (absent: `auto`, the model dtype, BF16 here) and TensorRT-LLM's `kv_cache_config: dtype:`.
The record keeps the value as written (`config.kv_cache_dtype`), the scripts and commit it was read at
(`config.launch_scripts`), and `kv_format` (fp8_e4m3 / fp8 → fp8, auto → bf16). The same scripts give the number of
prompts the benchmark sent, `--num-prompts $((CONC * N))` (N = 10 in every script so far): `config.num_prompts`
= N × concurrency, so the estimate simulates that finite run (its first wave arrives at once) rather than a steady
state. TensorRT-LLM scripts also give the MoE backend (`MOE_BACKEND="TRTLLM"`, written into `moe_config: backend:`):
`config.moe_backend` when every variant agrees for the record's configuration: the scripts' if / elif / else blocks
are followed where each test compares ISL, OSL, CONC, TP, EP_SIZE or DP_ATTENTION with a literal (any other test
leaves the backend unread).

Usage (the fixture file and the scripts are read from fetched copies of the repositories, never committed here):
    python -m knowledge.import_inferencex --snapshot FIXTURE.json URL [--snapshot ...] [--scripts REPO] --out PATH
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import orjson
import yaml

SOURCE = "inferencex-api-snapshot"
HARDWARE = {"h100": ("h100-sxm", "NVIDIA H100 SXM"), "h200": ("h200-sxm", "NVIDIA H200 SXM"),
            "b200": ("b200-sxm", "NVIDIA B200"), "b300": ("b300-sxm", "NVIDIA B300"),
            "gb200": ("gb200", "NVIDIA GB200"), "gb300": ("gb300-superchip", "NVIDIA GB300"),
            "mi300x": ("mi300x", "AMD Instinct MI300X"), "mi325x": ("mi325x", "AMD Instinct MI325X"),
            "mi355x": ("mi355x", "AMD Instinct MI355X")}
FRAMEWORK = {"sglang": ("sglang", None), "trt": ("trtllm", None), "vllm": ("vllm", None), "atom": ("other", "AMD ATOM")}
MODELS = {"dsr1": ("deepseek-r1", "deepseek-ai/DeepSeek-R1")}
RANGE_RATIO = 0.8
NOTE = ("output_tokens_per_s and total_tokens_per_s = InferenceX's per-GPU figure x {n} GPUs (derived by us); "
        "input/output_tokens are the nominal ISL/OSL of InferenceX's random dataset, drawn with a range ratio, uniform "
        "in [0.8, 1.0] x nominal, so the means are about 0.9 x nominal (Little's law on these figures agrees). "
        "InferenceX's 'dsr1' is DeepSeek-R1 (its FP4 runs use quantized R1-0528 checkpoints).{fp4} Snapshot of the "
        "InferenceX API kept as a test fixture in the InferenceX-app repository; the run_url is the GitHub Actions run "
        "that measured it.")
FP4 = " FP4 checkpoint (NVFP4 on NVIDIA, MXFP4 on AMD; InferenceX labels both 'fp4')."


def version_of(image: str | None) -> str | None:
    """The framework version a container tag names, or None."""
    if not image or ":" not in image:
        return None
    tag = image.rsplit(":", 1)[1]
    if image.startswith("rocm/atom"):
        m = re.search(r"atom(\d[\w.]*)", tag)
        return f"{m.group(1)} ({tag})" if m else tag
    m = re.match(r"v?(\d+\.\d+[\w.]*?)(?:-(?:cu|rocm|amd)\w*.*)?$", tag)
    return m.group(1) if m else tag


def config_key(r: dict) -> tuple:
    cfg = r["config"]
    return (r["hardware"], r.get("framework_name") or r["framework"], r["weight_format"], cfg.get("spec_decoding"),
            r["tp"], r["ep"], bool(r["dp_attention"]), r["input_tokens"], r["output_tokens"], r["load"]["concurrency"])


def _ms(m: dict, name: str, stats=("mean", "median", "p90", "p99")) -> dict | None:
    out = {s: m[f"{s}_{name}"] for s in stats if isinstance(m.get(f"{s}_{name}"), (int, float))}
    return out or None


def implausible(e: dict) -> str | None:
    """Why an entry's figures cannot all be right, or None."""
    m = e["metrics"]
    if any(isinstance(m.get(f"{s}_itl"), (int, float)) and m[f"{s}_itl"] > 10 for s in ("mean", "median", "p99")):
        return "an ITL over 10 s"
    out, e2e = m.get("output_tput_per_gpu"), m.get("mean_e2el")
    if out and e2e:
        little = e["conc"] / e2e * e["osl"] * (1 + RANGE_RATIO) / 2 / e["decode_tp"]
        if abs(out / little - 1) > 0.25:
            return "output tokens/s more than 25 % from Little's law"
    return None


def record_of(e: dict, url: str) -> dict | None:
    """One fixture entry as a benchmark record, or None when it is out of scope (multi-node or disaggregated, or a
    model/hardware/framework this converter does not name)."""
    if e.get("disagg") or e.get("is_multinode"):
        return None
    if e["hardware"] not in HARDWARE or e["framework"] not in FRAMEWORK or e["model"] not in MODELS:
        return None
    hw, hw_name = HARDWARE[e["hardware"]]
    fw, fw_name = FRAMEWORK[e["framework"]]
    model, model_hf = MODELS[e["model"]]
    m = e["metrics"]
    n = int(e["decode_tp"])
    spec = None if e.get("spec_method") in (None, "none") else e["spec_method"]
    date = e["date"]
    ident = (f"inferencex-{e['model']}-{e['precision']}-{e['hardware']}-{e['framework']}"
             f"{'-' + spec if spec else ''}-tp{e['decode_tp']}-ep{e['decode_ep']}{'-dpa' if e['decode_dp_attention'] else ''}"
             f"-c{e['conc']}-{e['isl'] // 1024}k{e['osl'] // 1024}k-{date.replace('-', '')}")
    locator = (f"entry hardware={e['hardware']} framework={e['framework']} model={e['model']} precision={e['precision']} "
               f"spec_method={e.get('spec_method')} decode_tp={e['decode_tp']} decode_ep={e['decode_ep']} "
               f"decode_dp_attention={str(e['decode_dp_attention']).lower()} isl={e['isl']} osl={e['osl']} "
               f"conc={e['conc']} date={date} run_url={e['run_url']}")
    out_gpu = m.get("output_tput_per_gpu")
    measured = {k: v for k, v in {
        "ttft_s": _ms(m, "ttft"), "tpot_s": _ms(m, "tpot"), "itl_s": _ms(m, "itl", ("mean", "median", "p99")),
        "e2e_s": _ms(m, "e2el", ("mean", "median")),
        "output_tokens_per_s": round(out_gpu * n, 3) if out_gpu else None,
        "output_tokens_per_s_per_device": out_gpu,
        "total_tokens_per_s": round(m["tput_per_gpu"] * n, 3) if m.get("tput_per_gpu") else None,
    }.items() if v is not None}
    published = ", ".join(f"{k} {m[k]}{' s' if k.endswith(('tpot', 'ttft', 'e2el')) else ''}"
                          for k in ("tput_per_gpu", "output_tput_per_gpu", "median_tpot", "mean_tpot", "median_ttft",
                                    "mean_ttft", "p99_ttft", "median_e2el") if k in m)
    rec = {
        "id": ident, "source": SOURCE, "url": url, "locator": locator, "date": date,
        "model": model, "model_hf": model_hf, "hardware": hw, "hardware_name": hw_name, "devices": n,
        "framework": fw, **({"framework_name": fw_name} if fw_name else {}),
        "framework_version": version_of(e.get("image")),
        "weight_format": e["precision"], "kv_format": None,
        "tp": e["decode_tp"], "pp": 1, "ep": e["decode_ep"], "dp_attention": bool(e["decode_dp_attention"]),
        "replicas": 1, "input_tokens": e["isl"], "output_tokens": e["osl"], "dataset": "random",
        "load": {"concurrency": e["conc"]},
        "config": {"image": e.get("image"), "spec_decoding": spec, "disagg": False, "run_url": e["run_url"],
                   "random_range_ratio": RANGE_RATIO,
                   "random_range_ratio_source": "RANDOM_RANGE_RATIO default in InferenceX .github/workflows/benchmark-tmpl.yml"},
        "measured": measured, "as_published": published,
        "note": NOTE.format(n=n, fp4=FP4 if e["precision"] == "fp4" else ""),
    }
    return rec


def merge(existing: list[dict], snapshots: list[tuple[list[dict], str]]) -> tuple[list[dict], Counter]:
    """The records of `existing` and of every snapshot entry, one per configuration (the newest date; on a tie the
    one seen first, existing records first), and a count of what was left out and why."""
    left = Counter()
    best: dict[tuple, dict] = {}
    order: list[tuple] = []

    def offer(r: dict) -> None:
        k = config_key(r)
        if k not in best:
            best[k] = r
            order.append(k)
        elif r["date"] > best[k]["date"]:
            best[k] = r
            left["an older run of a configuration kept at its newest"] += 1
        elif r["id"] != best[k]["id"]:
            left["an older run of a configuration kept at its newest"] += 1

    for r in existing:
        offer(r)
    for entries, url in snapshots:
        for e in entries:
            r = record_of(e, url)
            if r is None:
                why = ("multi-node or disaggregated" if e.get("disagg") or e.get("is_multinode")
                       else f"not mapped: {e['hardware']}/{e['framework']}/{e['model']}")
                left[why] += 1
                continue
            why = implausible(e)
            if why:
                left[f"figures that contradict each other: {why}"] += 1
                continue
            offer(r)
    return [best[k] for k in order], left


SCRIPTS_REPO = "https://github.com/SemiAnalysisAI/InferenceX"
SCRIPT_HW = {v[0]: k for k, v in HARDWARE.items()}
KV_FORMATS = {"fp8_e4m3": "fp8", "fp8": "fp8", "auto": "bf16"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def scripts_for(record: dict, names: list[str]) -> list[str]:
    """The single-node launch scripts among `names` (paths) that run this record's configuration."""
    hw, fw, spec = SCRIPT_HW.get(record["hardware"]), record["framework"], record["config"].get("spec_decoding")
    base = f"dsr1_{record['weight_format']}_{hw}"
    found = []
    for path in names:
        name = path.rsplit("/", 1)[-1].removesuffix(".sh")
        if not path.startswith("benchmarks/") or "multi_node" in path or not (name == base or name.startswith(base + "_")):
            continue
        tokens = [t for t in name[len(base):].split("_") if t]
        if any(t in ("disagg", "dynamo", "atom", "vllm", "sglang") or "disagg" in t for t in tokens):
            continue
        if "/agentic/" in path:     # agentic traces, another benchmark than the fixed-length random one
            continue
        if ("trt" in tokens) != (fw == "trtllm") or ("mtp" in tokens) != bool(spec):
            continue
        found.append(path)
    return sorted(found)


def kv_dtype_of(text: str, framework: str) -> str | None:
    """The KV-cache dtype a launch script sets (SGLang: `auto` when it sets none), or None when it cannot tell."""
    if framework == "sglang":
        found = re.findall(r"kv-cache-dtype[= ]+\"?([A-Za-z0-9_]+)", text)
        return found[0] if found else "auto"
    found = re.findall(r"kv_cache_config:\s*\n(?:\s+\w+:.*\n)*?\s+dtype:\s*(\w+)", text)
    return found[0] if found else None


_PROMPTS = (re.compile(r"num-prompts[= ]+\"?\$\(\(\s*\$?CONC\s*\*\s*(\d+)\s*\)\)"),
            re.compile(r"num-prompts[= ]+\"?\$\(\(\s*(\d+)\s*\*\s*\$?CONC\s*\)\)"),
            re.compile(r"num-prompts[= ]+\"?\$\{?CONC\}?(?![\w*])"))


def prompts_per_user_of(text: str) -> int | None:
    """How many prompts per concurrent user a launch script's benchmark sends (`--num-prompts $((CONC * 10))` → 10,
    `--num-prompts $CONC` → 1), or None when it sets the count some other way (a variable, -1) or not at all."""
    found = set()
    for i, rx in enumerate(_PROMPTS):
        found.update(int(m) if i < 2 else 1 for m in rx.findall(text))
    return found.pop() if len(found) == 1 else None


_ATOM = re.compile(r'^"?\$\{?(\w+)\}?"?\s*(==|!=|-eq|-ne|-ge|-gt|-le|-lt)\s*"?([\w.]+)"?$')
_NUM_OPS = {"-eq": lambda a, b: a == b, "-ne": lambda a, b: a != b, "-ge": lambda a, b: a >= b,
            "-gt": lambda a, b: a > b, "-le": lambda a, b: a <= b, "-lt": lambda a, b: a < b}


def _condition(text: str, env: dict[str, str]) -> bool | None:
    """A `[[ ... ]]` test of the form the launch scripts use: comparisons of $VARs with literals joined by && or ||;
    None when any part is of another form or names a variable `env` lacks."""
    m = re.fullmatch(r"\s*\[\[\s*(.*?)\s*\]\]\s*;?\s*(?:then)?\s*", text)
    if not m:
        return None
    ors = []
    for alt in m.group(1).split("||"):
        ands = []
        for atom in alt.split("&&"):
            a = _ATOM.match(atom.strip())
            if not a or a.group(1) not in env:
                return None
            var, op, lit = env[a.group(1)], a.group(2), a.group(3)
            if op in ("==", "!="):
                ands.append((var == lit) == (op == "=="))
            else:
                try:
                    ands.append(_NUM_OPS[op](float(var), float(lit)))
                except ValueError:
                    return None
        ors.append(all(ands))
    return any(ors)


def assigned_value(text: str, name: str, env: dict[str, str]) -> str | None:
    """The value a launch script leaves in `name` (`NAME="X"` lines) for one configuration, `env` giving the script's
    inputs (ISL, OSL, CONC, TP, EP_SIZE, DP_ATTENTION): its if / elif / else / fi blocks are followed where every test
    is a comparison `_condition` reads. None when the variable is never set, or a block that sets it has a test of
    another kind (nothing is guessed)."""
    value, stack = None, []            # stack: [taken_now, a branch already taken, known]
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip() if not raw.strip().startswith("#") else ""
        if not line:
            continue
        head = line.split(None, 1)[0]
        if head == "if" and re.search(r";\s*fi$", line):       # a one-line `if ...; then ...; fi`
            if f"{name}=" in line:
                cond = _condition(line[2:line.index("then")] if "then" in line else "", env)
                inner = re.search(rf'{name}="?([\w.-]+)"?', line)
                if cond is None or not all(level[2] for level in stack):
                    return None
                if cond and inner and all(level[0] for level in stack):
                    value = inner.group(1)
            continue
        if head in ("if", "elif"):
            cond = _condition(line[len(head):], env)
            if head == "if":
                stack.append([cond is True, cond is True, cond is not None])
            elif stack:
                top = stack[-1]
                top[2] = top[2] and cond is not None
                top[0] = (not top[1]) and cond is True
                top[1] = top[1] or cond is True
            continue
        if head == "else" and stack:
            stack[-1][0] = not stack[-1][1]
            stack[-1][1] = True
            continue
        if head == "fi" and stack:
            stack.pop()
            continue
        m = re.fullmatch(rf'{name}="?([\w.-]+)"?', line)
        if m:
            if not all(level[2] for level in stack):
                return None          # set inside a block whose test is not read
            if all(level[0] for level in stack):
                value = m.group(1)
    return value


def moe_backend_of(text: str, env: dict[str, str] | None = None) -> str | None:
    """The TensorRT-LLM MoE backend a launch script sets for one configuration (`MOE_BACKEND=` as `assigned_value`
    follows it, else a literal `moe_config: backend: X`), or None when it cannot tell."""
    if "MOE_BACKEND=" in text:
        return assigned_value(text, "MOE_BACKEND", env or {})
    found = set(re.findall(r"moe_config:\s*\n\s+backend:\s*([A-Z_]+)\b", text))
    return found.pop() if len(found) == 1 else None


def script_env(r: dict) -> dict[str, str]:
    """The inputs InferenceX's launch scripts read, for one record (nominal lengths, as the workflow passes them)."""
    nominal = {922: 1024, 7373: 8192}
    isl, osl = r.get("input_tokens"), r.get("output_tokens")
    return {"ISL": str(nominal.get(isl, isl)), "OSL": str(nominal.get(osl, osl)),
            "CONC": str((r.get("load") or {}).get("concurrency", "")), "TP": str(r.get("tp")),
            "EP_SIZE": str(r.get("ep") or 1), "DP_ATTENTION": "true" if r.get("dp_attention") else "false"}


def with_launch_config(records: list[dict], repo: Path) -> Counter:
    """Give each SGLang / TensorRT-LLM record what its launch scripts set on its run date (in place): the KV-cache
    dtype, the number of prompts its benchmark sent and, for TensorRT-LLM, the MoE backend."""
    said, trees = Counter(), {}
    for r in records:
        if r["framework"] not in ("sglang", "trtllm") or r["hardware"] not in SCRIPT_HW:
            continue
        commit = _git(repo, "rev-list", "-1", f"--before={r['date']} 23:59:59", "HEAD").strip()
        if not commit:
            said["no commit of the scripts repository before the run date"] += 1
            continue
        if commit not in trees:
            trees[commit] = _git(repo, "ls-tree", "-r", "--name-only", commit).splitlines()
        paths = scripts_for(r, trees[commit])
        texts = {p: _git(repo, "show", f"{commit}:{p}") for p in paths}
        # a script that only starts the server (a docker variant whose client runs elsewhere) states no count
        per_user = {prompts_per_user_of(t) for t in texts.values() if "num-prompts" in t} or {None}
        conc = (r.get("load") or {}).get("concurrency")
        read = False                        # whether anything was read from these scripts (then they are named)
        if len(per_user) == 1 and None not in per_user and isinstance(conc, int):
            n = per_user.pop()
            r["config"]["num_prompts"] = n * conc
            r["config"]["num_prompts_rule"] = f"--num-prompts CONC × {n} in the launch scripts"
            read = True
            said[f"num_prompts = CONC × {n} from the launch scripts"] += 1
        else:
            said["no single prompt count in the launch scripts"] += 1
        if r["framework"] == "trtllm":
            env = script_env(r)
            backends = {moe_backend_of(t, env) for t in texts.values()}
            if len(backends) == 1 and None not in backends:
                r["config"]["moe_backend"] = backends.pop()
                read = True
                said[f"TensorRT-LLM MoE backend {r['config']['moe_backend']} from the launch scripts"] += 1
            else:
                said["no single TensorRT-LLM MoE backend in the launch scripts"] += 1
        kinds = {kv_dtype_of(t, r["framework"]) for t in texts.values()}
        if len(kinds) != 1 or None in kinds or next(iter(kinds)) not in KV_FORMATS:
            said[f"no single KV-cache dtype in the launch scripts ({r['framework']})"] += 1
        else:
            value = kinds.pop()
            r["kv_format"] = KV_FORMATS[value]
            r["config"]["kv_cache_dtype"] = value
            read = True
            said[f"KV-cache dtype {value} from the launch scripts"] += 1
        if read:
            r["config"]["launch_scripts"] = {"repo": SCRIPTS_REPO, "commit": commit, "paths": paths}
    return said


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--snapshot", nargs=2, action="append", metavar=("FIXTURE", "URL"), required=True,
                    help="a benchmarks.json fixture and the URL (repository, commit, path) it was read at")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "data" / "benchmarks" / "inferencex.yaml")
    ap.add_argument("--scripts", type=Path, default=None, help="a git copy of SemiAnalysisAI/InferenceX: read each "
                    "record's KV-cache dtype from its launch scripts on its run date")
    args = ap.parse_args(argv)
    existing = yaml.safe_load(args.out.read_text()) if args.out.exists() else []
    snaps = [(orjson.loads(Path(f).read_bytes()), url) for f, url in args.snapshot]
    records, left = merge(existing or [], snaps)
    if args.scripts is not None:
        for why, n in with_launch_config(records, args.scripts).most_common():
            print(f"  {n} × {why}")
    head = ("# InferenceX (SemiAnalysis) single-node DeepSeek-R1 serving points as benchmark records (issue #25 item 3); "
            "closed-loop vllm-bench-serve style runs. Written by `python -m knowledge.import_inferencex` (its "
            "docstring says how), one record per configuration at its newest run.\n")
    args.out.write_text(head + yaml.safe_dump(records, sort_keys=False, allow_unicode=True, width=120))
    print(f"{len(records)} records written to {args.out}")
    for why, n in left.most_common():
        print(f"  left out: {n} × {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

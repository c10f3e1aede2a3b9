"""The hardware values issue #26 found wrong, fixed at their source (one test per fixed value), the one rule for
the memory of aggregates, and the new records the serving calculators read (l40s with its measured kernels,
the MI300X's xGMI link as its default TP link)."""
from __future__ import annotations

import pytest

from calculators.domain import hardware_spec, link_spec
from calculators.perf import measured_system_of

GIB = 2**30


def _fact(lookup, hw_id: str, name: str) -> dict:
    return lookup("hardware", hw_id)[name]


# ------------------------------------------------------------------ the fixed values, each at its source

def test_h100_pcie_memory_bandwidth_is_nvidias_2_tb_s_not_the_a100_figure(lookup):
    fact = _fact(lookup, "h100-pcie-80gb", "memory_bandwidth_bytes_per_s")
    assert fact["value"] == 2.0e12                       # was 2.039e12, the A100 80GB PCIe figure
    assert fact["source"] == "aiconfigurator-h100-pcie" and fact["locator"] == "gpu.mem_bw"
    assert hardware_spec(lookup, "h100-pcie-80gb").memory_bandwidth_bytes_per_s == 2.0e12
    # the H100 PCIe must not carry the A100 80GB PCIe bandwidth any more
    a100 = _fact(lookup, "a100-80gb-pcie", "memory_bandwidth_bytes_per_s")["value"]
    assert fact["value"] != a100


def test_gb300_nvl72_reads_288_gib_per_gpu_not_the_rack_total_over_72(lookup):
    fact = _fact(lookup, "gb300-nvl72", "memory_bytes")
    assert fact["per"] == "device" and fact["basis"] == "binary"
    assert fact["value"] == 288 * GIB                     # was 20e12 per: total, i.e. 2.778e11 per GPU
    spec = hardware_spec(lookup, "gb300-nvl72")
    assert spec.devices == 72 and spec.memory_bytes == 288 * GIB
    # consistent with its own note: nvidia-smi's 284,208 MiB per GPU is below the stored capacity and above 288e9
    assert 284_208 * 2**20 < spec.memory_bytes and 284_208 * 2**20 > 288e9
    assert "20 TB" in fact["as_published"] and "20 TB" in fact["note"]
    assert spec.memory_bytes > 20e12 / 72


def test_gb200_nvl72_value_and_note_agree_186_gib_per_gpu(lookup):
    fact = _fact(lookup, "gb200-nvl72", "memory_bytes")
    assert fact["per"] == "device" and fact["basis"] == "binary"
    assert fact["value"] == 186 * GIB                     # was 72 x 186 GiB stored as the '13.4 TB' total
    assert "13.4 TB" in fact["as_published"] and "372 GB" in fact["as_published"]
    notes = lookup("hardware", "gb200-nvl72")["notes"]
    assert "stored as printed" not in notes               # the old note contradicted the value
    # the same GPU read through the 2-GPU superchip record (an exact binary total) gives the same figure
    assert hardware_spec(lookup, "gb200-nvl72").memory_bytes == hardware_spec(lookup, "gb200-superchip").memory_bytes


def test_b300_per_gpu_carries_power_and_dense_fp8_fp4_peaks(lookup):
    spec = hardware_spec(lookup, "b300-sxm")
    assert spec.power_w == 1100
    assert spec.peak("FP8").flop_per_s == 4.5e15 and spec.peak("FP4").flop_per_s == 14e15
    assert spec.peak("BF16").flop_per_s == 2.25e15


# ------------------------------------------------------------------ one rule for aggregates (DATA-FORMAT.md)

def test_every_aggregate_memory_reads_one_device_exactly(catalog):
    """per: device, or an exact per: total binary sum (a whole number of GiB per device), or a decimal total
    whose note says dividing it is an approximation."""
    checked = 0
    for rec in catalog.records["hardware"]:
        m = rec.get("memory_bytes")
        if rec.get("scope", "device") == "device" or not m:
            continue
        checked += 1
        n = rec["devices_in_scope"]
        if m["per"] == "device":
            assert m["basis"] == "binary" or m.get("note"), rec["id"]
        elif m["per"] == "total" and m["basis"] == "binary":
            assert (m["value"] / n) % GIB == 0, f"{rec['id']}: a binary total must be an exact sum of GiB devices"
        else:
            assert m["per"] == "total" and "approximat" in (m.get("note") or ""), rec["id"]
    assert checked >= 10


# ------------------------------------------------------------------ new records the calculators read

def test_l40s_is_the_measured_l40s_system_and_roofline_measures_on_it(lookup):
    from api.envelope import run
    from calculators.framework import jsonable

    assert measured_system_of(lookup, "l40s") == "l40s"
    spec = hardware_spec(lookup, "l40s")
    assert spec.memory_bytes == 48 * GIB and spec.memory_bandwidth_bytes_per_s == 864e9
    assert spec.scale_up_link == "pcie4-x16"
    body = {"model": "qwen3-8b", "hardware": "l40s", "phase": "decode", "estimate": "measured", "batch": 8,
            "context_tokens": 4096, "kv_format": "fp8"}
    out = jsonable(run("roofline", body, lookup))["outputs"]
    assert out["measured_time_s"] > 0 and out["measured_to_bound_ratio"] > 0
    # the memory-bound floor is the stored 864 GB/s: the measured step cannot beat it
    assert out["measured_time_s"] >= out["time_s"]


def test_mi300x_tensor_parallel_defaults_to_xgmi_not_pcie(lookup):
    spec = hardware_spec(lookup, "mi300x")
    assert spec.scale_up_link == "xgmi-mi300x"
    agg, one = link_spec(lookup, "xgmi-mi300x"), link_spec(lookup, "xgmi-mi300x-link")
    assert agg.one_way_bytes_per_s == 7 * one.one_way_bytes_per_s == 448e9
    # alpha per ring round: a user-reported rccl-tests 8-GPU all-reduce of 8 B (19.28 us) over its 14 rounds
    assert agg.latency_s == pytest.approx(19.28e-6 / 14, rel=1e-3)
    assert agg.one_way_bytes_per_s > link_spec(lookup, "pcie5-x16").one_way_bytes_per_s


def test_mi325x_times_its_all_reduces_with_the_mi300x_alpha_and_says_it_is_assumed(lookup):
    spec = hardware_spec(lookup, "mi325x")
    assert spec.scale_up_link == "xgmi-mi325x"
    link = link_spec(lookup, "xgmi-mi325x")
    assert link.latency_s == link_spec(lookup, "xgmi-mi300x").latency_s
    import yaml
    from pathlib import Path
    rec = next(r for r in yaml.safe_load(Path("knowledge/data/links.yaml").read_text()) if r["id"] == "xgmi-mi325x")
    assert rec["latency_s"]["note"].startswith("ASSUMED FROM THE MI300X")


@pytest.mark.parametrize("hw_id, memory_gib", [("l4", 24), ("mi250x", 128), ("mi325x", 256), ("mi355x", 288),
                                                ("tpu-v5e", 16), ("tpu-v6e", 32), ("tpu-v7", 192),
                                                ("trainium2", 96), ("gaudi3", 128)])
def test_new_device_records_read_their_vendor_capacity_as_gib(lookup, hw_id, memory_gib):
    fact = _fact(lookup, hw_id, "memory_bytes")
    assert fact["basis"] == "binary" and fact["value"] == memory_gib * GIB
    assert hardware_spec(lookup, hw_id).is_device


@pytest.mark.parametrize("link_id, published_bidirectional", [("tpu-v5e-ici", 400e9), ("tpu-v6e-ici", 800e9),
                                                               ("gaudi3-roce-24x200g", 1200e9)])
def test_bidirectional_totals_are_stored_one_way(lookup, link_id, published_bidirectional):
    assert link_spec(lookup, link_id).one_way_bytes_per_s == published_bidirectional / 2


# ------------------------------------------------------------------ values added for issue #26 item 1 (one test each)

def _peak_fact(lookup, hw_id: str, precision: str, sparsity: str = "dense") -> dict:
    rows = [p for p in lookup("hardware", hw_id)["peaks"]
            if p["input_precision"] == precision and p["sparsity"] == sparsity]
    assert len(rows) == 1, f"{hw_id} has {len(rows)} {sparsity} {precision} rows"
    return rows[0]["flop_per_s"]


@pytest.mark.parametrize("hw_id, precision, value, source, locator_part", [
    ("mi325x", "BF16", 1307.4e12, "amd-rocm-blog-peak-flops", "MI325X row"),
    ("mi325x", "FP16", 1307.4e12, "amd-rocm-blog-matrix-cores-cdna", "Matrix FP16"),
    ("mi325x", "FP8", 2614.9e12, "amd-rocm-blog-matrix-cores-cdna", "Matrix FP8"),
    ("mi325x", "FP32", 163.4e12, "amd-rocm-blog-matrix-cores-cdna", "Matrix FP32"),
    ("mi325x", "FP64", 163.4e12, "amd-rocm-blog-matrix-cores-cdna", "Matrix FP64"),
    ("mi355x", "FP16", 2.5e15, "amd-rocm-blog-matrix-cores-cdna", "MI355X (CDNA4)', row Matrix FP16"),
    ("mi355x", "FP8", 5e15, "amd-rocm-blog-matrix-cores-cdna", "row Matrix FP8"),
    ("mi355x", "FP6", 10e15, "amd-rocm-blog-matrix-cores-cdna", "row Matrix FP6"),
    ("mi355x", "FP4", 10e15, "amd-rocm-blog-matrix-cores-cdna", "row Matrix FP4"),
    ("mi355x", "FP32", 157.3e12, "amd-rocm-blog-matrix-cores-cdna", "row Matrix FP32"),
    ("mi355x", "FP64", 78.6e12, "amd-rocm-blog-matrix-cores-cdna", "row Matrix FP64"),
    ("b200-sxm", "FP8", 4.5e15, "aiconfigurator-b200-sxm", "gpu.fp8_tc_flops"),
    ("h200-sxm", "FP8", 1.978e15, "aiconfigurator-h200-sxm", "gpu.fp8_tc_flops"),
    ("gb200", "BF16", 2.5e15, "aiconfigurator-gb200", "gpu.bfloat16_tc_flops"),
    ("gb200", "FP8", 5e15, "aiconfigurator-gb200", "gpu.fp8_tc_flops"),
    ("gb200", "NVFP4", 10e15, "aiconfigurator-gb200", "gpu.fp4_tc_flops"),
    ("gb200", "INT8", 5e15, "aiconfigurator-gb200", "gpu.int8_tc_flops"),
])
def test_added_dense_peak_value_unit_and_source(lookup, hw_id, precision, value, source, locator_part):
    fact = _peak_fact(lookup, hw_id, precision)
    assert fact["value"] == pytest.approx(value, rel=1e-12)     # FLOP/s (ops/s for INT8), SI, not TFLOPS
    assert fact["source"] == source and locator_part in fact["locator"]
    assert lookup("source", source)["url"].startswith("https://")
    assert hardware_spec(lookup, hw_id).peak(precision).flop_per_s == pytest.approx(value, rel=1e-12)


def test_gb200_per_gpu_record_matches_its_superchip_and_rack(lookup):
    rec = lookup("hardware", "gb200")
    assert rec["scope"] == "device" and rec["devices_in_scope"] == 1
    spec = hardware_spec(lookup, "gb200")
    assert spec.memory_bytes == 186 * GIB and rec["memory_bytes"]["basis"] == "binary"
    assert rec["memory_bytes"]["source"] == "nvidia-gb200-page" and "372 GB" in rec["memory_bytes"]["as_published"]
    assert spec.memory_bandwidth_bytes_per_s == 8e12 and rec["memory_bandwidth_bytes_per_s"]["locator"] == "gpu.mem_bw"
    assert spec.power_w == 1200 and rec["power_w"]["source"] == "aiconfigurator-gb200"
    assert spec.links == ("nvlink5", "nvlink-c2c") and spec.scale_up_link == "nvlink5"
    assert "gb200-nvl72" in rec["notes"] and "gb200-superchip" in rec["notes"]
    for other in ("gb200-nvl72", "gb200-superchip"):              # the same GPU read per device agrees
        o = hardware_spec(lookup, other)
        assert o.memory_bytes == spec.memory_bytes
        assert o.memory_bandwidth_bytes_per_s == spec.memory_bandwidth_bytes_per_s
        assert o.peak("BF16").flop_per_s == spec.peak("BF16").flop_per_s


def test_tpu7x_hbm_bandwidth_and_ici_link(lookup):
    fact = _fact(lookup, "tpu-v7", "memory_bandwidth_bytes_per_s")
    assert fact["value"] == 7.38e12 and fact["source"] == "google-cloud-tpu7x" and "HBM bandwidth" in fact["locator"]
    spec = hardware_spec(lookup, "tpu-v7")
    assert spec.memory_bandwidth_bytes_per_s == 7.38e12 and spec.scale_up_link == "tpu7x-ici"
    ici = link_spec(lookup, "tpu7x-ici")
    assert ici.one_way_bytes_per_s == 600e9                       # 1200 GBps bidirectional per chip / 2
    assert lookup("link", "tpu7x-ici")["one_way_bytes_per_s"]["source"] == "google-cloud-tpu7x"


def test_nvlink_c2c_is_450_gb_s_one_way_from_nvidias_900_gb_s_total(lookup):
    rec = lookup("link", "nvlink-c2c")
    fact = rec["one_way_bytes_per_s"]
    assert fact["value"] == 450e9 and fact["source"] == "nvidia-grace-hopper-in-depth"
    assert "900 GB/s total" in fact["as_published"] and "half" in rec["direction_convention"]
    assert link_spec(lookup, "nvlink-c2c").one_way_bytes_per_s == 450e9


@pytest.mark.parametrize("hw_id, field, value, source", [
    ("mi325x", "memory_bandwidth_bytes_per_s", 6e12, "tensorwave-mi325x-vs-mi300x-2025-05"),
    ("mi355x", "memory_bandwidth_bytes_per_s", 8e12, "theregister-amd-mi355x-2025-06-12"),
    ("mi355x", "power_w", 1400, "theregister-amd-mi355x-2025-06-12"),
])
def test_amd_figures_from_secondary_sources_say_so(lookup, hw_id, field, value, source):
    """MI325X/MI355X bandwidth and power: AMD's figures as a provider or the press reports them (AMD's own pages are
    not among the stored copies); the fact names its source and says it is secondary, and the record no longer lists
    the figure as unknown."""
    rec = lookup("hardware", hw_id)
    fact = rec[field]
    assert fact["value"] == value and fact["source"] == source
    assert "SECONDARY SOURCE" in fact["note"]
    assert field not in (rec.get("unknown") or {})
    assert lookup("source", source)["url"].startswith("https://")


def test_mi250x_launch_figures_are_the_whole_oam_from_a_secondary_source(lookup):
    rec = lookup("hardware", "mi250x")
    assert rec["memory_bandwidth_bytes_per_s"]["value"] == 3.2e12 and rec["power_w"]["value"] == 560
    assert set(rec["unknown"]) == {"peak_fp8_dense"}
    spec = hardware_spec(lookup, "mi250x")
    assert spec.peak("BF16").flop_per_s == 383e12 and spec.peak("FP16").flop_per_s == 383e12
    assert all("SECONDARY SOURCE" in rec[f]["note"] for f in ("memory_bandwidth_bytes_per_s", "power_w"))

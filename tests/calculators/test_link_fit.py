"""α–β of links from measured all-reduces (NVIDIA AIConfigurator's NCCL tables), and what they change."""
from __future__ import annotations

import numpy as np
import pytest

from calculators.domain.link_fit import DTYPE_BYTES, fit_all_reduce, fit_for
from calculators.framework.runner import compute
from knowledge.loader import catalog_lookup, default_catalog

LOOKUP = catalog_lookup(default_catalog())
SYSTEMS = sorted({r["system"] for r in LOOKUP("measurement", "index") if r["table"] == "nccl"})


def nccl(system: str) -> dict:
    return LOOKUP("measurement", f"{system}/nccl")["columns"]


def test_every_measured_system_has_a_fit_per_gpu_count():
    assert len(SYSTEMS) >= 6
    for system in SYSTEMS:
        cols = nccl(system)
        fits = fit_all_reduce(cols)
        measured = sorted({int(p) for p, op in zip(cols["num_gpus"], cols["op_name"]) if op == "all_reduce"})
        assert [f.gpus for f in fits] == measured, system
        for f in fits:
            assert f.start_up_s > 0 and f.algorithm_bytes_per_s > 0 and f.points >= 3


@pytest.mark.parametrize("system", SYSTEMS)
def test_the_book_form_reproduces_the_fitted_line(system):
    """2(p−1)·α + 2(p−1)/p · M / B equals a + M / b for the converted α, B: nothing is lost in the conversion."""
    for f in fit_all_reduce(nccl(system)):
        p = f.gpus
        m = np.array([0.0, 1e3, 1e6, 1e9])
        book = 2 * (p - 1) * f.alpha_s + 2 * (p - 1) / p * m / f.link_bytes_per_s
        assert book == pytest.approx(f.time_s(m), rel=1e-12)


@pytest.mark.parametrize("system", SYSTEMS)
def test_residuals_describe_the_measured_points(system):
    cols = nccl(system)
    for f in fit_all_reduce(cols):
        sel = (cols["op_name"] == "all_reduce") & (cols["num_gpus"] == f.gpus) & (cols["nccl_dtype"] == f.source["dtype"])
        m = cols["message_size"][sel] * DTYPE_BYTES[f.source["dtype"]]
        rel = f.time_s(m) / (cols["latency"][sel] / 1e3) - 1
        assert np.max(np.abs(rel)) == pytest.approx(f.max_relative_residual)
        assert np.sqrt(np.mean(rel ** 2)) == pytest.approx(f.rms_relative_residual)
        assert f.rms_relative_residual < 0.3          # one line describes a collective to within ~30 % RMS


def test_nearest_gpu_count_when_not_measured():
    fits = fit_all_reduce(nccl("gb200"))              # measured at 2 and 4 GPUs only
    fit, exact = fit_for(fits, 8)
    assert (fit.gpus, exact) == (4, False)


def _best_tp(link: str, **extra) -> int:
    body = {"model": "qwen3-235b-a22b", "hardware": "h200-sxm", "link": link, "tp": [1, 2, 4, 8],
            "context_tokens": 4096, "batch": 32, **extra}
    return compute("parallel-split", body, LOOKUP)[2]


def test_measured_alpha_beta_changes_the_tp_choice_on_pcie():
    """Qwen3-235B-A22B decode on H200 (batch 32, 4K context): NVLink favours TP = 8; over PCIe the measured
    all-reduce makes TP = 4 the better choice, which the datasheet rate with α = 0 hides."""
    nv, pcie = _best_tp("nvlink4"), _best_tp("pcie4-x16")
    assert nv.outputs["best"]["tp"] == 8 and pcie.outputs["best"]["tp"] == 4
    assert nv.inputs["latency_s"]["basis"] == "measured fit (h200_sxm)"       # the hardware's own system
    assert pcie.inputs["latency_s"]["basis"] == "measured fit (l40s)"
    assert any("measured fit" in a and "RMS relative residual" in a for a in pcie.assumptions)
    sheet = LOOKUP("link", "pcie4-x16")["one_way_bytes_per_s"]["value"]
    naive = _best_tp("pcie4-x16", link_alpha_s=0, link_bandwidth_bytes_per_s=sheet)
    assert naive.outputs["best"]["tp"] == 8


def test_a_link_without_measurement_keeps_its_sourced_or_assumed_alpha():
    unmeasured = [l["id"] for l in default_catalog().records["link"] if l["id"] not in LOOKUP("measurement", "systems")["links"]]
    assert unmeasured
    r = compute("collective", {"operation": "all_reduce", "ranks": 8, "message_bytes": 1e6, "link": unmeasured[0]}, LOOKUP)[2]
    assert "measured" not in r.inputs["latency_s"]["basis"]

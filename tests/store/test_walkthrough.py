"""The newcomer's path of knowledge/DATA-FORMAT.md, followed literally: add a node record to a copy of the
data files, build the store, and see every calculator read it per device with its device count."""
from __future__ import annotations

import shutil
import textwrap

import pytest

from calculators.framework import GIB
from calculators.framework.runner import compute
from knowledge.build import BuildError, build
from knowledge.loader import DATA_DIR
from knowledge.store import Store

# An 8-GPU H100 server as a newcomer would enter it from a vendor page: totals, each saying what it counts.
NODE = textwrap.dedent("""
- id: walkthrough-8x-h100
  name: Example 8 x H100 SXM server
  vendor: NVIDIA
  architecture: Hopper
  form_factor: 8-GPU server
  scope: node
  devices_in_scope: 8
  memory_bytes: {value: 687194767360, source: aiconfigurator-h100-sxm, locator: gpu.mem_capacity, as_published: 640 GB,
                 note: '8 x 80 GiB', per: total, basis: binary, basis_source: aiconfigurator-h100-sxm,
                 basis_locator: gpu.mem_capacity}
  memory_bandwidth_bytes_per_s: {value: 26800000000000, source: nvidia-h100-page, locator: Product Specifications, per: total}
  power_w: {value: 10200, source: nvidia-h100-page, locator: Product Specifications, per: system,
            note: server input power including CPUs and fans}
  links: [nvlink4]
""")


@pytest.fixture(scope="module")
def walkthrough_store(tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    shutil.copytree(DATA_DIR, data, dirs_exist_ok=True)
    with open(data / "hardware.yaml", "a", encoding="utf-8") as f:
        f.write(NODE)
    db = tmp_path_factory.mktemp("db") / "walkthrough.duckdb"
    build(db, data)
    store = Store(db)
    yield store
    store.close()


def test_the_new_record_builds_and_reads_per_device(walkthrough_store):
    lookup = walkthrough_store.lookup
    w = compute("weight-memory", {"model": "llama-3.1-70b", "hardware": "walkthrough-8x-h100"}, lookup)[2]
    assert w.outputs["devices"] == 8                                    # the node's devices share the replica
    assert w.outputs["memory_per_device_bytes"] == 80 * GIB              # the total divided by 8
    assert any("node of 8 devices" in a for a in w.assumptions)
    r = compute("roofline", {"model": "qwen3-8b", "phase": "decode", "hardware": "walkthrough-8x-h100"}, lookup)[2]
    assert r.outputs["memory_time_s"] == pytest.approx(r.outputs["bytes"] / (26.8e12 / 8))


def test_a_whole_system_power_is_not_divided(walkthrough_store):
    from calculators.framework.runner import solve
    with pytest.raises(Exception) as err:
        solve("energy", {"hardware": "walkthrough-8x-h100", "time_s": 1}, walkthrough_store.lookup)
    assert err.value.status == 422 and "power_w" in err.value.detail


def test_a_record_missing_what_its_numbers_count_does_not_build(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DATA_DIR, data)
    with open(data / "hardware.yaml", "a", encoding="utf-8") as f:
        f.write(NODE.replace(", per: total}", "}"))
    with pytest.raises(BuildError) as err:
        build(tmp_path / "x.duckdb", data)
    assert "walkthrough-8x-h100" in str(err.value) and "per" in str(err.value)

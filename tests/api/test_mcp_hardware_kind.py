"""MCP list_hardware filters by the hardware kind the site and REST list use (issue #26 item 6) and gives each row
its kind; called in process through the app's tools (no live server)."""
from __future__ import annotations

from collections import Counter

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from api.mcp_server import _Tools, build_tools
from calculators.domain import HARDWARE_KINDS, hardware_kind


@pytest.fixture(scope="module")
def tools(client):
    return _Tools(client.app)


def test_list_hardware_offers_the_kind_filter_with_its_values(client):
    tool = {t.name: t for t in build_tools(client.app)}["list_hardware"]
    schema = tool.parameters
    kind = schema["properties"]["kind"]
    refs = [kind] + kind.get("anyOf", [])
    enums = [v for r in refs for v in (r.get("enum") or schema.get("$defs", {}).get(
        str(r.get("$ref", "")).rsplit("/", 1)[-1], {}).get("enum") or [])]
    assert set(enums) == set(HARDWARE_KINDS)
    assert "kind" in tool.description


def test_every_row_has_its_kind_and_the_filter_keeps_only_that_kind(tools, catalog):
    want = Counter(hardware_kind(h) for h in catalog.records["hardware"])
    every = tools.list_hardware({"limit": 100}).structured_content
    assert every["items"] and all(r["kind"] in HARDWARE_KINDS for r in every["items"])
    for kind in HARDWARE_KINDS:
        page = tools.list_hardware({"kind": kind, "limit": 100}).structured_content
        assert page["total"] == want[kind] > 0, kind
        assert page["items"] and {r["kind"] for r in page["items"]} == {kind}
    amd = tools.list_hardware({"kind": "data-centre-gpu", "vendor": "AMD", "limit": 100}).structured_content
    assert "mi300x" in {r["id"] for r in amd["items"]} and all(r["vendor"] == "AMD" for r in amd["items"])
    racks = tools.list_hardware({"kind": "rack-system", "limit": 2, "offset": 1}).structured_content
    assert racks["offset"] == 1 and len(racks["items"]) == 2 and racks["next_offset"] == 3


def test_an_unknown_kind_is_refused_naming_kind(tools):
    with pytest.raises(ToolError) as e:
        tools.list_hardware({"kind": "gpu"})
    assert "kind" in str(e.value)

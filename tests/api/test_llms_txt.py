"""`/llms.txt` names every JSON endpoint of the OpenAPI document, so an agent reading it finds the newer ones too
(benchmarks, validation, calibration, models by Hugging Face repo name)."""
from __future__ import annotations

import re

SHAPE = re.compile(r"\{[^}/]*\}")


def shape(path: str) -> str:
    """A path with every parameter as `{}` (`/api/v1/models/{owner}/{model_id}` -> `/api/v1/models/{}/{}`)."""
    return SHAPE.sub("{}", path)


def uncovered(paths: list[str], text: str) -> list[str]:
    """The /api/v1 paths llms.txt does not name. A path counts as named when its shape appears in the text (with any
    parameter names), or when it is a list's item route (one parameter, the whole last segment:
    /api/v1/hardware/{hardware_id}) and the list itself is named."""
    named = shape(text)

    def covered(path: str) -> bool:
        if re.search(re.escape(shape(path)) + r"(?![\w/{-])", named):
            return True
        parent, _, last = path.rpartition("/")
        return path.count("{") == 1 and SHAPE.fullmatch(last) is not None and covered(parent)

    return [p for p in paths if p.startswith("/api/v1") and not covered(p)]


def test_llms_txt_names_every_api_route(client):
    paths = list(client.get("/openapi.json").json()["paths"])
    assert len(paths) > 80
    text = client.get("/llms.txt").text
    assert uncovered(paths, text) == []
    for new in ("/api/v1/benchmarks", "/api/v1/validation", "/api/v1/calibration", "/api/v1/calculators/serving-estimate",
                "/api/v1/models/{owner}/{model_id}", "kind=data-centre-gpu"):
        assert new in text, new


def test_the_check_can_fail():
    """A route that llms.txt does not name is reported; an item route under a named list is not."""
    text = "- [/api/v1/models](/api/v1/models) and /api/v1/export/{kind}.csv"
    assert uncovered(["/api/v1/models", "/api/v1/models/{model_id}", "/api/v1/models/{owner}/{model_id}",
                      "/api/v1/benchmarks", "/api/v1/export/{name}.csv", "/api/v1/export/{kind}.parquet",
                      "/api/v1/model"], text) == [
        "/api/v1/models/{owner}/{model_id}", "/api/v1/benchmarks", "/api/v1/export/{kind}.parquet", "/api/v1/model"]

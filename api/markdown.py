"""The calculator envelope as Markdown, for agents that paste answers (`Accept: text/markdown`)."""
from __future__ import annotations

from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from starlette.requests import Request

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
_env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=False, undefined=StrictUndefined,
                   trim_blocks=True, lstrip_blocks=True)


def wants_markdown(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return "text/markdown" in accept and "application/json" not in accept.split("text/markdown")[0]


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


_env.filters["cell"] = _cell


def render_markdown(envelope: dict, calc) -> str:
    return _env.get_template("calculator.md.j2").render(e=envelope, calc=calc)

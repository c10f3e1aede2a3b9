"""The downloads page: every table of the store as CSV and Parquet, and the built DuckDB file, with row counts,
columns, the content hash and a licence note per kind (the HTML twin of /api/v1/export, like Datasette's)."""
from __future__ import annotations

from fastapi import Request
from starlette.responses import HTMLResponse

from api.routes.export import exporter_of
from api.site.render import page_router, render
from api.urls import urls

router = page_router()


@router.get("/downloads", response_class=HTMLResponse)
def downloads_page(request: Request) -> HTMLResponse:
    """Every kind with its row count, columns, CSV and Parquet links; the DuckDB file; provenance."""
    index = exporter_of(request).index()
    return render(request, "downloads.html.j2", title="Downloads", twin=urls.api_export(), index=index,
                  total_rows=sum(k["rows"] for k in index["kinds"]))

"""The web layer: JSON API under /api/v1, the HTML site, MCP. `api.app:app` is the ASGI app."""

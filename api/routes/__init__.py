"""JSON routes, one module per resource, all mounted under /api/v1."""

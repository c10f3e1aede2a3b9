# AI Infra Casebook: one immutable image per release, the store built into it.
#   docker build -t casebook .
#   docker run --read-only --tmpfs /tmp:rw,size=256m,mode=1777 -p 8000:8000 casebook
# The root filesystem may be read-only: everything written at run time goes to /tmp (the server's private
# copy of the store, about 35 MB, and the download files, written on first request), so /tmp needs a tmpfs.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH

# an unprivileged user with no home and no shell runs the service
RUN groupadd --system --gid 10001 casebook \
 && useradd --system --uid 10001 --gid casebook --no-create-home --home-dir /nonexistent \
            --shell /usr/sbin/nologin casebook

WORKDIR /app
# dependencies first (a layer that changes only with pyproject.toml), then the code and the data files: the three
# packages hold everything the service reads (templates and static files in api/, data files and migrations in knowledge/)
COPY pyproject.toml README.md ./
COPY api/ api/
COPY calculators/ calculators/
COPY knowledge/ knowledge/
RUN python -m venv "$VIRTUAL_ENV" \
 && pip install -e . \
 && python -m compileall -q /app "$VIRTUAL_ENV"

# the store: built and verified once, here, from the data files in this image; read-only from now on
ENV CASEBOOK_DB=/app/var/casebook.duckdb
RUN casebook build --db "$CASEBOOK_DB" \
 && chmod -R a-w /app

# run time: nothing is built, every write goes to /tmp (a tmpfs when the root filesystem is read-only)
ENV PYTHONDONTWRITEBYTECODE=1 \
    CASEBOOK_BUILD=0 \
    CASEBOOK_HOST=0.0.0.0 \
    CASEBOOK_PORT=8000 \
    CASEBOOK_WORKERS=2 \
    CASEBOOK_RUNTIME_DIR=/tmp \
    CASEBOOK_EXPORT_DIR=/tmp/casebook-export \
    CASEBOOK_GRACEFUL_SHUTDOWN_S=20
USER casebook:casebook
EXPOSE 8000
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CASEBOOK_PORT', '8000'), timeout=4)"]
ENTRYPOINT ["casebook", "serve", "--host", "0.0.0.0"]

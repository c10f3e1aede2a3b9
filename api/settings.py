"""Settings in one place, read from the environment (CASEBOOK_*)."""
from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.build import DEFAULT_DB

VERSION = "0.1.0"


def _env(name: str, default: str) -> str:
    return os.environ.get(name, default).strip()


def _env_int(name: str, default: int, minimum: int = 0) -> int:
    """An integer setting from the environment; a clear error naming the variable when it is not one."""
    raw = _env(name, str(default))
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ValueError(f"{name}={value} is below its minimum {minimum}")
    return value


def _env_float(name: str, default: float, minimum: float = 0.0) -> float:
    """A number-of-seconds setting from the environment; a clear error naming the variable when it is not one."""
    raw = _env(name, str(default))
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if not value >= minimum:
        raise ValueError(f"{name}={value} is below its minimum {minimum}")
    return value


def _env_bool(name: str, default: bool) -> bool:
    """A yes/no setting: 1/true/yes/on or 0/false/no/off (any case)."""
    raw = _env(name, "1" if default else "0").lower()
    if raw in ("1", "true", "yes", "on"):
        return True
    if raw in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}={raw!r} is not a yes/no value (1/0, true/false, yes/no, on/off)")


def _price_as_of(name: str) -> str:
    """The price rule's reference date, `name` as the calculators read it (calculators.domain.price_as_of); a clear
    error naming the variable when it is not an ISO date."""
    from calculators.domain import PRICE_AS_OF_ENV, price_as_of

    return price_as_of().isoformat() if name == PRICE_AS_OF_ENV else _env(name, "")


@dataclass(frozen=True)
class Settings:
    db_path: Path = field(default_factory=lambda: Path(os.environ.get("CASEBOOK_DB", str(DEFAULT_DB))))
    #: build the store at start-up when missing or stale (serve does; tests may pass a built file)
    build_if_stale: bool = field(default_factory=lambda: os.environ.get("CASEBOOK_BUILD", "1") != "0")
    #: largest request body accepted, bytes (a 100,000-point sweep is about 1.5 MB of JSON)
    max_body_bytes: int = field(default_factory=lambda: int(os.environ.get("CASEBOOK_MAX_BODY_BYTES", str(4 * 2**20))))
    #: largest number of requests in one batch call
    max_batch: int = 1000

    # ---- the HTTP server (`casebook serve`; see api/server.py and the README's Configuration section)
    #: address and port serve listens on, and its worker processes (the --host/--port/--workers defaults)
    host: str = field(default_factory=lambda: _env("CASEBOOK_HOST", "127.0.0.1"))
    port: int = field(default_factory=lambda: _env_int("CASEBOOK_PORT", 8000, minimum=0))
    workers: int = field(default_factory=lambda: _env_int("CASEBOOK_WORKERS", 1, minimum=1))
    #: largest request head (request line + headers), bytes; beyond it: 431
    max_header_bytes: int = field(default_factory=lambda: _env_int("CASEBOOK_MAX_HEADER_BYTES", 64 * 2**10, minimum=1024))
    #: time a client has to send a whole request head from connecting (or from its first byte), s; then 408
    header_timeout_s: float = field(default_factory=lambda: _env_float("CASEBOOK_HEADER_TIMEOUT_S", 10.0, minimum=0.1))
    #: time a client has to send a whole request body once its head is read, s; then 408 (the app applies the same
    #: limit in api.middleware.BodyLimitMiddleware; this one also covers requests the app is not reading)
    body_timeout_s: float = field(default_factory=lambda: _env_float("CASEBOOK_BODY_TIMEOUT_S", 10.0, minimum=0.1))
    #: time a client has to take each part of an answer (the server's send buffer over its high-water mark must drain
    #: within it), s; then the connection is closed and its buffers freed: a client that never reads cannot hold them
    write_timeout_s: float = field(default_factory=lambda: _env_float("CASEBOOK_WRITE_TIMEOUT_S", 30.0, minimum=0.1))
    #: an idle keep-alive connection is closed after this, s
    keep_alive_s: int = field(default_factory=lambda: _env_int("CASEBOOK_KEEP_ALIVE_S", 5, minimum=1))
    #: on SIGTERM, in-flight requests get this long to finish before they are cancelled, s
    graceful_shutdown_s: int = field(default_factory=lambda: _env_int("CASEBOOK_GRACEFUL_SHUTDOWN_S", 20, minimum=0))
    #: a worker that does not answer the supervisor's ping within this is replaced, s
    worker_healthcheck_s: int = field(default_factory=lambda: _env_int("CASEBOOK_WORKER_HEALTHCHECK_S", 10, minimum=1))
    #: take the client address and scheme from X-Forwarded-For/-Proto (only behind a proxy you run)
    trust_proxy_headers: bool = field(default_factory=lambda: _env_bool("CASEBOOK_TRUST_PROXY_HEADERS", False))
    #: the proxies whose forwarded headers are trusted when trust_proxy_headers is on (comma-separated IPs/CIDRs, or *)
    forwarded_allow_ips: str = field(default_factory=lambda: _env("CASEBOOK_FORWARDED_ALLOW_IPS", "127.0.0.1"))
    #: where serve keeps its private copy of the store while it runs (a tmpfs in a container)
    runtime_dir: Path = field(default_factory=lambda: Path(_env("CASEBOOK_RUNTIME_DIR", tempfile.gettempdir())))
    #: reference date of the default-price rule (ISO date; unset: today): offers older than 12 months before it are stale
    price_as_of: str = field(default_factory=lambda: _price_as_of("CASEBOOK_PRICE_AS_OF"))
    #: compute the validation report (serving-estimate on every stored benchmark) on a thread at start-up, so that
    #: the first calibrated estimate or plan does not wait for it
    warm_validation: bool = field(default_factory=lambda: _env_bool("CASEBOOK_WARM_VALIDATION", False))
    version: str = VERSION


def get_settings() -> Settings:
    return Settings()

"""Settings in one place, read from the environment (CASEBOOK_*)."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from knowledge.build import DEFAULT_DB

VERSION = "0.1.0"


@dataclass(frozen=True)
class Settings:
    db_path: Path = field(default_factory=lambda: Path(os.environ.get("CASEBOOK_DB", str(DEFAULT_DB))))
    #: build the store at start-up when missing or stale (serve does; tests may pass a built file)
    build_if_stale: bool = field(default_factory=lambda: os.environ.get("CASEBOOK_BUILD", "1") != "0")
    #: largest request body accepted, bytes (a 100,000-point sweep is about 1.5 MB of JSON)
    max_body_bytes: int = field(default_factory=lambda: int(os.environ.get("CASEBOOK_MAX_BODY_BYTES", str(4 * 2**20))))
    #: largest number of requests in one batch call
    max_batch: int = 1000
    version: str = VERSION


def get_settings() -> Settings:
    return Settings()

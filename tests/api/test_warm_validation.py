"""`CASEBOOK_WARM_VALIDATION`: the app starts the validation report on a thread at start-up (persisted beside the
store), so the first calibrated estimate or plan reads it instead of computing it; the suite turns it off."""
from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from api.app import create_app
from api.settings import Settings
from knowledge.store import Store
from knowledge.validation import cache_dir, cache_key, cached_report

NAME = "casebook-validation-warm"


def _warmers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == NAME]


def test_the_suite_turns_the_warm_up_off():
    assert Settings().warm_validation is False


def test_start_up_warms_the_validation_report_of_its_store(built_db, monkeypatch):
    import knowledge.validation as validation

    seen: list = []
    done = threading.Event()

    def record(store):
        seen.append(store.path)
        done.set()
        return {}

    monkeypatch.setattr(validation, "cached_report", record)
    app = create_app(Settings(db_path=built_db, build_if_stale=False, warm_validation=True))
    with TestClient(app) as client:
        assert client.get("/healthz").status_code == 200
        assert done.wait(timeout=60)
    assert seen == [built_db]


def test_the_warm_report_is_the_persisted_one(built_db):
    """What the warm-up computes is what later readers find beside the store."""
    store = Store(built_db)
    try:
        cached_report(store)
        assert (cache_dir(store) / f"{cache_key(store)}.json").is_file()
    finally:
        store.close()


def test_without_the_warm_up_no_thread_starts(built_db):
    before = len(_warmers())
    app = create_app(Settings(db_path=built_db, build_if_stale=False, warm_validation=False))
    with TestClient(app):
        assert len(_warmers()) == before

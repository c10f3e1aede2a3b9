"""Fair under load (issue 14, part 3): costly calculations run in a bounded pool with a bounded queue. With the
pool forced to one thread and its queue full, a costly calculation is answered 503 problem+json with
Retry-After (REST, batch, the site's form and MCP alike), a cheap one still runs inline, and /healthz answers
while a calculation holds the pool. Orderings are asserted, never wall-clock times (the benchmark
`benchmarks/bench_limits.py --healthz` prints how long /healthz takes beside a 2 s calculation).
"""
from __future__ import annotations

import threading

import pytest

from api import service
from calculators.framework import limits

#: a calculation over the inline threshold (so it goes to the pool) and far under every limit
COSTLY = {"model": "qwen3-8b", "tokens": list(range(1, limits.INLINE_EVALUATIONS + 500))}
CHEAP = {"model": "qwen3-8b", "tokens": 8192}


@pytest.fixture
def held_pool():
    """A pool of one thread and no waiting place, its thread held until the test lets it go."""
    pool = service.configure_pool(workers=1, queue=0)
    release, started = threading.Event(), threading.Event()

    def hold() -> str:
        started.set()
        release.wait(30)
        return "held"

    holder = pool.submit(hold)
    started.wait(30)
    yield pool, release, holder
    release.set()
    holder.result(30)
    service.configure_pool()


def test_a_full_pool_answers_503_with_retry_after(client, held_pool):
    r = client.post("/api/v1/calculators/kv-cache", json=COSTLY)
    assert r.status_code == 503
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.headers["retry-after"] == str(limits.RETRY_AFTER_S)
    p = r.json()
    assert p["status"] == 503 and p["retry_after_s"] == limits.RETRY_AFTER_S
    assert p["limit"]["env"] == "CASEBOOK_LIMIT_POOL_QUEUE" and "retry after" in p["detail"]


def test_a_cheap_calculation_runs_inline_beside_a_full_pool(client, held_pool):
    r = client.post("/api/v1/calculators/kv-cache", json=CHEAP)
    assert r.status_code == 200 and r.json()["calculator"] == "kv-cache"


def test_a_costly_batch_and_site_form_are_503_too(client, held_pool):
    batch = client.post("/api/v1/calculators:batch", json={"requests": [{"calculator": "kv-cache", "request": COSTLY}]})
    assert batch.status_code == 503 and batch.headers["retry-after"] == str(limits.RETRY_AFTER_S)
    page = client.get("/calculators/kv-cache", params={"body": '{"model":"qwen3-8b","tokens":' + str(COSTLY["tokens"]) + "}"})
    assert page.status_code == 503 and page.headers["retry-after"] == str(limits.RETRY_AFTER_S)


def test_the_pool_answers_again_once_free(client, held_pool):
    pool, release, holder = held_pool
    assert client.post("/api/v1/calculators/kv-cache", json=COSTLY).status_code == 503
    release.set()
    assert holder.result(30) == "held"
    r = client.post("/api/v1/calculators/kv-cache", json=COSTLY)
    assert r.status_code == 200 and len(r.json()["outputs"]["bytes_total"]) == len(COSTLY["tokens"])
    assert pool.taken == 0


def test_healthz_answers_while_a_calculation_holds_the_pool(client):
    """One thread, one waiting place: a held calculation and a queued real one; /healthz answers before
    either finishes (the event loop is never blocked by calculations)."""
    pool = service.configure_pool(workers=1, queue=1)
    release, started = threading.Event(), threading.Event()

    def hold() -> None:
        started.set()
        release.wait(30)

    try:
        holder = pool.submit(hold)
        started.wait(30)
        answers: dict[str, int] = {}
        queued = threading.Thread(target=lambda: answers.setdefault(
            "calc", client.post("/api/v1/calculators/kv-cache", json=COSTLY).status_code))
        queued.start()
        health = client.get("/healthz")
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert not holder.done() and "calc" not in answers          # answered while the calculations wait
        release.set()
        queued.join(60)
        assert answers["calc"] == 200
    finally:
        release.set()
        service.configure_pool()


def test_a_pool_thread_runs_nested_calculations_inline():
    """A batch runs in the pool and its items on the same thread: a pool of one never waits on itself."""
    pool = service.CalculationPool(1, 0)
    try:
        assert pool.submit(lambda: pool.run(lambda: 41) + 1).result(30) == 42
    finally:
        pool.shutdown()


def test_a_slot_is_released_when_its_calculation_ends_not_before():
    pool = service.CalculationPool(1, 0)
    go = threading.Event()
    try:
        f = pool.submit(go.wait, 30)
        with pytest.raises(service.PoolFull):
            pool.submit(lambda: None)
        assert pool.taken == 1
        go.set()
        f.result(30)
        assert pool.submit(lambda: "free").result(30) == "free"
    finally:
        go.set()
        pool.shutdown()

"""Front-end glue for running calculators: the store as the lookup, runner errors as problem bodies, and the
bounded pool that costly calculations run in.

The work itself is `api.envelope.run` (the runner's `solve`, wrapped in the envelope); this module maps its typed errors to RFC 9457 problem details
(`CalculationFailed`) for the HTTP routes, the batch endpoint, the site and MCP, and decides where a
calculation runs: a cheap one (by the cost model of `calculators.framework.limits`) inline, a costly one in a small
thread pool with a bounded queue, so that no burst of heavy requests takes every thread of the server and
`/healthz` and cheap requests keep being answered. When the pool and its queue are full the answer is 503
with `Retry-After`.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from api.envelope import case_refs as _case_refs
from api.envelope import run
from api.problems import problem_body, run_error_body
from api.urls import urls
from calculators.framework import limits
from calculators.framework import no_lookup
from calculators.framework.registry import REGISTRY
from calculators.framework.runner import RunError

T = TypeVar("T")


class CalculationFailed(Exception):
    """A request that cannot be answered: carries its problem body, HTTP status and any response headers."""

    def __init__(self, status: int, body: dict, headers: dict[str, str] | None = None):
        self.status = status
        self.body = body
        self.headers = headers or {}
        super().__init__(body.get("detail"))

    @classmethod
    def from_run_error(cls, err: RunError) -> CalculationFailed:
        return cls(err.status, run_error_body(err))


# --------------------------------------------------------------------------- the pool

class PoolFull(Exception):
    """Every pool thread is busy and every waiting place taken: answer 503 with Retry-After."""

    def __init__(self, workers: int, queue: int, retry_after_s: int):
        self.workers, self.queue, self.retry_after_s = workers, queue, retry_after_s
        super().__init__(f"all {workers} calculation threads are busy and {queue} calculations are waiting")


_in_pool = threading.local()


def _mark_pool_thread() -> None:
    """Pool threads run nested calculations inline (waiting on their own pool could deadlock it)."""
    _in_pool.yes = True


class CalculationPool:
    """A fixed number of threads and a bounded number of waiting calculations; beyond both, PoolFull.

    A slot is released when its calculation finishes (not when its caller stops waiting), so the bound
    holds even when clients go away mid-calculation."""

    def __init__(self, workers: int, queue: int):
        self.workers = max(int(workers), 1)
        self.queue = max(int(queue), 0)
        self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="casebook-calc",
                                            initializer=_mark_pool_thread)
        self._lock = threading.Lock()
        self._taken = 0

    @property
    def taken(self) -> int:
        """Calculations running or waiting."""
        return self._taken

    def submit(self, fn: Callable[..., T], *args: Any) -> Future:
        """Start `fn(*args)` in the pool, or PoolFull when it has no place left."""
        with self._lock:
            if self._taken >= self.workers + self.queue:
                raise PoolFull(self.workers, self.queue, int(limits.limit("RETRY_AFTER_S")))
            self._taken += 1
        try:
            future = self._executor.submit(fn, *args)
        except BaseException:
            self._release(None)
            raise
        future.add_done_callback(self._release)
        return future

    def _release(self, _future: Future | None) -> None:
        with self._lock:
            self._taken -= 1

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """`fn(*args)` in the pool, waited for (inline when already on a pool thread)."""
        if getattr(_in_pool, "yes", False):
            return fn(*args)
        return self.submit(fn, *args).result()

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


_pool: CalculationPool | None = None
_pool_lock = threading.Lock()


def pool() -> CalculationPool:
    """The process's calculation pool (sized from CASEBOOK_LIMIT_POOL_WORKERS and _POOL_QUEUE on first use)."""
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = CalculationPool(int(limits.limit("POOL_WORKERS")), int(limits.limit("POOL_QUEUE")))
    return _pool


def configure_pool(workers: int | None = None, queue: int | None = None) -> CalculationPool:
    """Replace the pool (tests and the server's start); None takes the limit's value."""
    global _pool
    with _pool_lock:
        old = _pool
        _pool = CalculationPool(int(limits.limit("POOL_WORKERS")) if workers is None else workers,
                                int(limits.limit("POOL_QUEUE")) if queue is None else queue)
    if old is not None:
        old.shutdown()
    return _pool


def pool_full_failure(exc: PoolFull) -> CalculationFailed:
    """The 503 problem for a full pool, with its Retry-After header."""
    body = problem_body(503, "Service busy", f"{exc}; retry after {exc.retry_after_s} s", None, "busy")
    body["retry_after_s"] = exc.retry_after_s
    body["limit"] = {"name": "pool_queue", "env": limits.ENV_PREFIX + "POOL_QUEUE", "value": exc.queue}
    return CalculationFailed(503, body, {"Retry-After": str(exc.retry_after_s)})


def is_cheap(name: str, body: Any) -> bool:
    """A calculation small enough to run inline: few point-evaluations by the cost model (estimated on the
    body as given; the runner checks the validated request again before computing)."""
    calc = REGISTRY.get(name)
    if calc is None:
        return True                      # answered with a 404 at once
    try:
        return limits.cost_of(calc, body).evaluations <= limits.limit("INLINE_EVALUATIONS")
    except (TypeError, ValueError, AttributeError):
        return False


def in_pool(fn: Callable[..., T], *args: Any, cheap: bool = False) -> T:
    """`fn(*args)` inline when `cheap`, else in the calculation pool; a full pool is CalculationFailed (503)."""
    if cheap:
        return fn(*args)
    try:
        return pool().run(fn, *args)
    except PoolFull as exc:
        raise pool_full_failure(exc) from None


# --------------------------------------------------------------------------- calculating

def lookup_of(store):
    """The store's lookup (which also lists the ids of a kind, `lookup("ids", kind)`, so that an unknown id
    in a request is answered with the closest ones), or one that knows no ids when there is no store."""
    return no_lookup if store is None else store.lookup


def case_refs(store, slugs) -> list[dict]:
    return _case_refs(lookup_of(store), slugs)


def explanation_url(name: str, body: dict) -> str:
    """The calculator page computing `body` (spelled by the site's URL builder)."""
    return urls.calculator(name, body)


def calculate_here(name: str, body: Any, store) -> dict:
    """The envelope for `body`, computed on this thread (a batch's items, inside the pool), or CalculationFailed."""
    try:
        return run(name, body, lookup_of(store))
    except RunError as err:
        raise CalculationFailed.from_run_error(err) from None


def calculate(name: str, body: Any, store) -> dict:
    """The envelope for `body` (a dict or an already validated request model), or CalculationFailed: a cheap
    request computed inline, a costly one in the bounded pool (503 with Retry-After when it is full)."""
    return in_pool(calculate_here, name, body, store, cheap=is_cheap(name, body))

"""The HTTP server behind `casebook serve`: uvicorn configured with the limits of `api.settings`.

- Request heads (request line + headers) are limited in size (431) and in time (408), request bodies in
  time (408), idle keep-alive connections are closed: `GuardedHttpToolsProtocol`, a thin subclass of
  uvicorn's httptools protocol (uvicorn's own h11 limit is used when httptools is missing).
- Answers are written in parts of WRITE_CHUNK_BYTES, each once the one before has drained, and a client that does
  not take a part within `write_timeout_s` has its connection reset and the rest of its answer dropped: a client
  that never reads has about one part in the connection's buffers (not a copy of the whole answer), and holds its
  answer only until the deadline; then the allocator is asked to give the memory back (`malloc_trim`).
- SIGTERM drains: listeners close, in-flight requests get `graceful_shutdown_s` to finish.
- Forwarded headers are trusted only when configured; no `server` header.
- The exit status tells whether the server ran: 0 after a signal, 3 when it could not start (port in use,
  app or workers failing at start-up, workers dying over and over), for any number of workers.
- Workers die with their supervisor: a supervisor killed outright (SIGKILL, OOM killer) cannot stop them, so
  each worker asks Linux for SIGTERM when its parent dies (`prctl(PR_SET_PDEATHSIG)`) and also watches its
  parent's pid (other systems, or a parent gone before the request): they drain and exit, freeing the port.
"""
from __future__ import annotations

import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
import socket
import struct
import sys
import threading
import time
import asyncio
from asyncio import TimerHandle
from typing import Any

import orjson
import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors import multiprocess as _multiprocess
from uvicorn.supervisors.multiprocess import Multiprocess, Process

from api.settings import Settings
from calculators.framework import limits

log = logging.getLogger("uvicorn.error")

#: exit status of serve when the server could not start or could not keep workers alive (uvicorn's value)
START_FAILED = STARTUP_FAILURE
#: a server whose workers died this many times within CRASH_WINDOW_S stops, exiting with START_FAILED
CRASH_LIMIT = 5
CRASH_WINDOW_S = 60.0
#: after refusing a request, read and drop what the client still sends for this long before closing, so the
#: client reads the refusal instead of a connection reset
LINGER_S = 1.0
#: a response body larger than this is handed to the transport in parts of this size, each after the part before
#: has drained (uvicorn waits while the transport's buffer is over its high-water mark), so that a slow client's
#: connection buffers one part, not a copy of the whole body
WRITE_CHUNK_BYTES = 256 * 1024
#: after a body at least this large has been sent (or dropped), the C allocator is asked to return its free memory
#: to the system (`malloc_trim`, at most once per TRIM_DELAY_S): the answers of slow readers are freed in the
#: middle of the heap, which glibc otherwise keeps (12 dropped 33 MB answers left a worker ~360 MB larger)
TRIM_AFTER_BYTES = 8 * 2**20
TRIM_DELAY_S = 0.5
_PROBLEMS = "https://casebook.invalid/problems/"

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - uvicorn[standard] brings httptools on CPython
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


_limits: Settings | None = None


def _settings() -> Settings:
    """The settings of this process, read once (workers inherit the environment serve checked)."""
    global _limits
    if _limits is None:
        _limits = Settings()
    return _limits


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol with a size limit on request heads and deadlines on heads and bodies.

        A request head is counted from its first byte until the blank line that ends it, before the parser
        sees it, so an oversized head costs one read, not a parse. At most one read timer per connection: the
        head deadline runs from the connection (or from a read that left a head incomplete) until the head
        is complete, the body deadline from a read that left a body incomplete until it is complete.

        Writing has its own deadline: it runs while the transport's buffer is over its high-water mark (from
        `pause_writing` to `resume_writing`); a client that has not taken that much of the answer when it passes
        is a slow reader: its connection is reset (no lingering: the kernel drops what it still buffers) and the
        app's further sends for it are dropped. Bodies reach the transport in parts (`_in_parts`), so the deadline
        applies to each part, and a reading client, however slow its link, keeps its connection.
        """

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            s = _settings()
            self._max_head_bytes = s.max_header_bytes
            self._head_timeout_s = s.header_timeout_s
            self._body_timeout_s = s.body_timeout_s
            self._head_open = True       # reading a request head
            self._head_bytes = 0
            self._tail = b""             # the head's last bytes, to find a blank line split across reads
            self._deadline: TimerHandle | None = None
            self._refused = False
            self._write_timeout_s = s.write_timeout_s
            self._write_deadline: TimerHandle | None = None
            self.app = _in_parts(self.app)

        # -- connection
        def connection_made(self, transport) -> None:  # type: ignore[override]
            """Start the head deadline: a connection that sends nothing is closed when it passes."""
            super().connection_made(transport)
            self._arm(self._head_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            """Drop the deadlines with the connection."""
            self._disarm()
            self._disarm_write()
            super().connection_lost(exc)

        # -- writing
        def pause_writing(self) -> None:
            """The transport's buffer is over its high-water mark: the client has `write_timeout_s` to take it."""
            super().pause_writing()
            if self._write_deadline is None:
                self._write_deadline = self.loop.call_later(self._write_timeout_s, self._write_deadline_passed)

        def resume_writing(self) -> None:
            """The buffer has drained below its low-water mark: the deadline stops."""
            self._disarm_write()
            super().resume_writing()

        def _disarm_write(self) -> None:
            if self._write_deadline is not None:
                self._write_deadline.cancel()
                self._write_deadline = None

        def _write_deadline_passed(self) -> None:
            """A slow reader: reset the connection, which frees its buffers here and in the kernel at once."""
            self._write_deadline = None
            transport = self.transport
            if transport is None or transport.is_closing():
                return
            log.warning("closed the connection of %s: it did not take %d bytes of its answer within %g s "
                        "(CASEBOOK_WRITE_TIMEOUT_S)", self.client, transport.get_write_buffer_size(),
                        self._write_timeout_s)
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True      # the app's further sends are dropped, its receive() says disconnect
                cycle.message_event.set()
            sock = transport.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):   # linger 0: close with a reset, dropping unsent data
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            transport.abort()

        def data_received(self, data: bytes) -> None:
            """Count head bytes and refuse an oversized head (431) before parsing; start a deadline when a
            head or a body is left incomplete (a request that arrives whole starts no timer)."""
            if self._refused:
                return                   # lingering after a refusal: drop what the client still sends
            if self._head_open:
                tail = self._tail
                seen = tail + data if tail else data
                end = seen.find(b"\r\n\r\n")
                self._head_bytes += len(data) if end < 0 else end + 4 - len(tail)
                if self._head_bytes > self._max_head_bytes:
                    self._refuse(431, "Request header fields too large", "header-too-large",
                                 f"the request line and headers exceed {self._max_head_bytes} bytes "
                                 "(CASEBOOK_MAX_HEADER_BYTES)")
                    return
                if end < 0:
                    self._tail = seen[-3:]
            super().data_received(data)
            if self._deadline is None and not self._refused:
                if self._head_open:
                    if self._head_bytes:                 # part of a head arrived, the rest has not
                        self._arm(self._head_timeout_s)
                else:
                    cycle = self.cycle
                    if (cycle is not None and cycle.more_body and not cycle.response_complete
                            and not self.transport.is_closing()):
                        self._arm(self._body_timeout_s)

        # -- parser callbacks
        def on_headers_complete(self) -> None:
            """The head is complete: stop its deadline and count afresh for the next request."""
            self._head_open = False
            self._head_bytes = 0
            self._tail = b""
            self._disarm()
            super().on_headers_complete()

        def on_message_complete(self) -> None:
            """The body is complete: stop its deadline; what follows is the next request's head."""
            self._head_open = True
            self._disarm()
            super().on_message_complete()

        # -- deadlines and refusals
        def _arm(self, seconds: float) -> None:
            self._disarm()
            self._deadline = self.loop.call_later(seconds, self._deadline_passed)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _deadline_passed(self) -> None:
            """A head or body took too long: 408 (a connection that sent nothing is just closed)."""
            self._deadline = None
            if self.transport is None or self.transport.is_closing() or self._refused:
                return
            busy = self.cycle is not None and not self.cycle.response_complete
            if self._head_open:
                if busy:             # a pipelined head waits while the request before it is answered
                    self._arm(self._head_timeout_s)
                elif self._head_bytes == 0 and not self._tail:
                    self.transport.close()
                else:
                    self._refuse(408, "Request timeout", "request-timeout",
                                 f"the request head was not received within {self._head_timeout_s:g} s "
                                 "(CASEBOOK_HEADER_TIMEOUT_S)")
            elif busy and self.cycle.more_body:
                self._refuse(408, "Request timeout", "request-timeout",
                             f"the request body was not received within {self._body_timeout_s:g} s "
                             "(CASEBOOK_BODY_TIMEOUT_S)")

        def _refuse(self, status: int, title: str, kind: str, detail: str) -> None:
            """Answer `status` as problem+json and close, unless a response is already under way (then just close)."""
            self._refused = True
            self._disarm()
            cycle = self.cycle
            if cycle is not None and not cycle.response_complete:
                started = cycle.response_started
                cycle.disconnected = True    # the app's receive() now says disconnect; its sends are dropped
                cycle.message_event.set()
                if started:
                    self.transport.close()
                    return
            body = orjson.dumps({"type": _PROBLEMS + kind, "title": title, "status": status, "detail": detail})
            reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}[status]
            self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: application/problem+json\r\n"
                                 b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                                 % (status, reason, len(body), body))
            log.warning("refused a request from %s: %s", self.client, detail)
            if self.transport.can_write_eof():
                self.transport.write_eof()
                self.loop.call_later(LINGER_S, self.transport.close)
            else:  # pragma: no cover - TLS transports cannot half-close
                self.transport.close()


def _in_parts(app: Any) -> Any:
    """The ASGI `app` with every response body over WRITE_CHUNK_BYTES sent in parts of that size (views of the body:
    no copy), so that uvicorn's flow control (it waits for the transport to drain before each send) applies
    within a body, and the transport never buffers a whole large answer for a client that does not read it."""

    async def wrapped(scope, receive, send) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)

        async def send_in_parts(message) -> None:
            body = message.get("body", b"")
            if message["type"] != "http.response.body" or len(body) <= WRITE_CHUNK_BYTES:
                return await send(message)
            view, more = memoryview(body), message.get("more_body", False)
            try:
                for start in range(0, len(view), WRITE_CHUNK_BYTES):
                    end = start + WRITE_CHUNK_BYTES
                    await send({"type": "http.response.body", "body": view[start:end],
                                "more_body": more or end < len(view)})
            finally:
                if len(view) >= TRIM_AFTER_BYTES:
                    _trim_soon()

        await app(scope, receive, send_in_parts)

    return wrapped


_trim_pending = False


def _trim_soon() -> None:
    """Ask the C allocator to give its free memory back to the system in TRIM_DELAY_S (once the answer's last
    references are gone), once for any number of calls meanwhile; nothing where libc has no `malloc_trim`."""
    global _trim_pending
    if _trim_pending:
        return
    _trim_pending = True

    def trim() -> None:
        global _trim_pending
        _trim_pending = False
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)

    asyncio.get_running_loop().call_later(TRIM_DELAY_S, trim)


def uvicorn_config(settings: Settings, host: str, port: int, workers: int, log_level: str = "info",
                   access_log: bool = True, app: str = "api.app:app") -> uvicorn.Config:
    """The uvicorn configuration of `casebook serve`: limits and timeouts from `settings`."""
    guarded = HttpToolsProtocol is not None
    return uvicorn.Config(
        app, host=host, port=port, workers=workers, log_level=log_level, access_log=access_log,
        lifespan="on",                                   # a failing start-up is a failure, not "unsupported"
        http=GuardedHttpToolsProtocol if guarded else "h11",
        h11_max_incomplete_event_size=settings.max_header_bytes,   # the limit when h11 parses
        timeout_keep_alive=settings.keep_alive_s,
        timeout_graceful_shutdown=settings.graceful_shutdown_s,
        timeout_worker_healthcheck=settings.worker_healthcheck_s,
        proxy_headers=settings.trust_proxy_headers,
        forwarded_allow_ips=settings.forwarded_allow_ips if settings.trust_proxy_headers else None,
        server_header=False,
    )


#: how often a worker checks that its supervisor is still its parent
PARENT_CHECK_S = 0.5
_PR_SET_PDEATHSIG = 1


def die_with_parent(parent: int) -> None:
    """Make this process stop (SIGTERM, uvicorn's graceful shutdown) when process `parent` is no longer its
    parent: at once through the kernel on Linux, and by a watching thread everywhere (which also catches a
    parent that died before the kernel was asked)."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
                log.warning("prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno()))
        except (OSError, AttributeError) as exc:      # pragma: no cover - a libc without prctl
            log.warning("prctl(PR_SET_PDEATHSIG) unavailable: %s", exc)
    threading.Thread(target=_watch_parent, args=(parent,), name="casebook-parent-watch", daemon=True).start()


def _watch_parent(parent: int, interval: float = PARENT_CHECK_S) -> None:
    """Send this process SIGTERM once `parent` is no longer its parent (it died: the orphan was re-parented)."""
    while os.getppid() == parent:
        time.sleep(interval)
    log.error("worker [%s]: the supervisor [%s] is gone; shutting down", os.getpid(), parent)
    os.kill(os.getpid(), signal.SIGTERM)


class _Worker(Process):
    """A uvicorn worker process that does not outlive its supervisor (`die_with_parent`)."""

    def target(self, sockets: list | None = None) -> None:  # pragma: no cover - runs in the worker
        parent = multiprocessing.parent_process()
        die_with_parent(parent.pid if parent is not None and parent.pid else os.getppid())
        limits.cap_memory()          # past it a calculation gets MemoryError (a 503), not the kernel's OOM kill
        super().target(sockets)


class _Supervisor(Multiprocess):
    """uvicorn's worker supervisor, remembering why it stopped: a signal, or workers that could not run.
    Its workers are `_Worker`s: they stop when it dies, however it dies."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.signalled = False
        self._deaths: list[float] = []

    def init_processes(self) -> None:
        for _ in range(self.processes_num):
            process = _Worker(self.config, self.sockets)
            process.start()
            self.processes.append(process)

    def restart_all(self) -> None:
        """SIGHUP: uvicorn's rolling restart, with `_Worker`s as the replacements."""
        with _ours_as_uvicorns():
            super().restart_all()

    def handle_ttin(self) -> None:
        """SIGTTIN: one more worker, a `_Worker`."""
        with _ours_as_uvicorns():
            super().handle_ttin()

    def handle_int(self) -> None:
        self.signalled = True
        super().handle_int()

    def handle_term(self) -> None:
        self.signalled = True
        super().handle_term()

    def keep_subprocess_alive(self) -> None:
        """Replace dead or hung workers; stop when one fails at start-up or when they keep dying (a crash loop).
        Unlike a bare ping, a worker that exits while being pinged is seen at once, not after the timeout."""
        if self.should_exit.is_set():
            return
        for idx, process in enumerate(self.processes):
            if _answers(process, self.config.timeout_worker_healthcheck):
                continue
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:
                log.error("worker [%s] failed to start; stopping the server", process.pid)
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            now = time.monotonic()
            self._deaths = [t for t in self._deaths if now - t < CRASH_WINDOW_S] + [now]
            if len(self._deaths) >= CRASH_LIMIT:
                log.error("%d workers died within %g s; stopping the server", len(self._deaths), CRASH_WINDOW_S)
                self.should_exit.set()
                return
            log.warning("worker [%s] died (exit status %s); starting another", process.pid, process.exitcode)
            replacement = _Worker(self.config, self.sockets)
            replacement.start()
            self.processes[idx] = replacement


@contextlib.contextmanager
def _ours_as_uvicorns():
    """While uvicorn's supervisor code runs, the workers it starts by name are `_Worker`s (supervisor only)."""
    saved = _multiprocess.Process
    _multiprocess.Process = _Worker
    try:
        yield
    finally:
        _multiprocess.Process = saved


def _answers(process: Process, timeout: float) -> bool:
    """Whether a worker process is alive and answers the supervisor's ping within `timeout` seconds,
    checking every 0.1 s whether it has exited meanwhile."""
    if not process.process.is_alive():
        return False
    try:
        process.parent_conn.send(b"ping")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.parent_conn.poll(0.1):
                process.parent_conn.recv()
                return True
            if not process.process.is_alive():
                return False
    except (OSError, EOFError):
        return False
    return False


def run(config: uvicorn.Config) -> int:
    """Run the server until a signal stops it: 0 then; START_FAILED when it could not start or keep workers.
    The port is bound first, so a taken port fails at once, before any worker loads the app."""
    try:
        sock = config.bind_socket()
    except SystemExit:                   # uvicorn has logged why (address in use, permission…)
        return START_FAILED
    try:
        if config.workers > 1:
            supervisor = _Supervisor(config, sockets=[sock])
            supervisor.run()
            return 0 if supervisor.signalled else START_FAILED
        server = uvicorn.Server(config)
        limits.cap_memory()              # the one worker: as in `_Worker.target`
        # uvicorn re-raises a caught SIGTERM/SIGINT after its graceful shutdown; end quietly with status 0 then
        previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            server.run(sockets=[sock])
        except SystemExit as exc:
            return 0 if exc.code in (0, None) else START_FAILED
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0 if server.started else START_FAILED
    finally:
        sock.close()


def _stop(signum: int, frame: Any) -> None:
    """Signal handler outside uvicorn's: the server has stopped (or not started); leave with status 0."""
    raise SystemExit(0)

"""The /mcp endpoint, mounted without importing the MCP SDK: the SDK and its server are built at the first
/mcp request.

The SDK pulls in cryptography, rich, opentelemetry and sse_starlette (~30 MB RSS per worker), which a
worker that never answers an MCP call does not need. `mount_lazy` adds one route at /mcp; its first request
imports `api.mcp_server`, lets its `mount` add the real route(s) to a private sub-router whose state reads
through to the app's (the tools find `store` and `search_index` there), and starts the session manager in a
background task of the running event loop. The app's lifespan (`app.state.mcp_lifespan`) stops that task
at shutdown; a later start (another test client, another loop) builds the manager's run again on demand.

A request whose client disconnects before its answer is sent is cancelled (`until_disconnect`): the SDK reads
nothing after the body, so nothing else would notice, and the tool would run on for a client that is gone.
"""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.routing import Route


class _StateView:
    """The app's state for reading; what the MCP module stores (server, lifespan) stays here, so the app's
    own `mcp_lifespan` remains the lazy one."""

    def __init__(self, real: Any):
        object.__setattr__(self, "_real", real)
        object.__setattr__(self, "_own", {})

    def __getattr__(self, name: str) -> Any:
        own = object.__getattribute__(self, "_own")
        if name in own:
            return own[name]
        return getattr(object.__getattribute__(self, "_real"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__getattribute__(self, "_own")[name] = value


class LazyMCP:
    """ASGI endpoint at /mcp: builds the MCP server at its first request and hands every request to it."""

    def __init__(self, app: Any):
        self.app = app
        self.sub: Starlette | None = None
        self._lock: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task | None = None
        self._stop: asyncio.Event | None = None

    def _build(self) -> Starlette:
        """Import the MCP module (and the SDK) and let it mount into a private sub-app."""
        from api import mcp_server

        sub = Starlette()
        sub.state = _StateView(self.app.state)  # type: ignore[assignment]
        mcp_server.mount(sub)
        self.app.state.mcp_server = sub.state.mcp_server
        return sub

    async def _ensure_running(self) -> None:
        """Build the server once, and run its session manager in this event loop (once per loop)."""
        loop = asyncio.get_running_loop()
        if self._task is not None and self._loop is loop and not self._task.done():
            return
        if self._lock is None or self._loop is not loop:
            self._lock, self._loop, self._task = asyncio.Lock(), loop, None
        async with self._lock:
            if self._task is not None and not self._task.done():
                return
            if self.sub is None:   # importing the SDK takes ~0.5 s: off the event loop, which keeps serving
                self.sub = await asyncio.to_thread(self._build)
            runner = self.sub.state.mcp_lifespan
            started, stop = asyncio.Event(), asyncio.Event()

            async def hold() -> None:
                async with runner():
                    started.set()
                    await stop.wait()

            task = asyncio.create_task(hold())
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
            if task.done():            # the manager failed to start: raise its error here
                waiter.cancel()
                task.result()
            self._task, self._stop = task, stop

    async def stop(self) -> None:
        """Stop the session manager's task if this loop runs one (app shutdown)."""
        task, stop = self._task, self._stop
        self._task = self._stop = None
        if task is not None and stop is not None and self._loop is asyncio.get_running_loop():
            stop.set()
            await task

    async def __call__(self, scope, receive, send) -> None:
        await self._ensure_running()
        assert self.sub is not None
        await until_disconnect(self.sub.router, scope, receive, send)


async def until_disconnect(app: Any, scope, receive, send) -> None:
    """Run the ASGI `app` for one HTTP request, cancelled when the client disconnects before the answer is complete.

    Once the app has read the whole body, a watcher waits on `receive` for the disconnect (the app itself reads no
    more); the app's reads before that and the watcher's never overlap. The SDK runs a tool in a worker thread that
    a cancellation cannot interrupt: the tool checks for it between its steps (`mcp_server.stop_if_cancelled`)."""
    body_read, answered = anyio.Event(), False

    async def app_receive():
        message = await receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            body_read.set()
        return message

    async def app_send(message) -> None:
        nonlocal answered
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            answered = True
        await send(message)

    try:
        async with anyio.create_task_group() as tg:
            async def watch() -> None:
                await body_read.wait()
                while True:
                    message = await receive()
                    if message["type"] == "http.disconnect":
                        if not answered:
                            tg.cancel_scope.cancel()
                        return

            tg.start_soon(watch)
            await app(scope, app_receive, app_send)
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # the task group wraps what the app raised (a body refused as too large or too slow by the middleware, a
        # 4xx it maps to its problem): raise it as it was, so the middleware sees its own exception, not a group
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise


def mount_lazy(app: Any) -> LazyMCP:
    """Add /mcp to `app` without importing the MCP SDK; its lifespan hook stops the server at shutdown."""
    endpoint = LazyMCP(app)
    app.router.routes.append(Route("/mcp", endpoint=endpoint))

    @asynccontextmanager
    async def lifespan():
        try:
            yield
        finally:
            await endpoint.stop()

    app.state.mcp_lifespan = lifespan
    app.state.mcp_endpoint = endpoint
    return endpoint

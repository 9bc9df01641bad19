"""Django served over ASGI the way WSGI serves it: each request's sync code on a thread that is
kept from one request to the next.

Django's ASGI handler gives every request a thread of its own (asgiref's ThreadSensitiveContext):
it starts one when the request arrives, and stops and joins it when the request ends. Starting and
joining it, and the hops through asgiref's executors, were about 8% of a web process's CPU under
the load benchmark (py-spy). Here a request borrows a kept thread instead, runs everything Django
does for it there in two calls, as WSGI would in one (request_started, the middleware and the
view; and, once the response is sent, its close(), which sends request_finished), and gives the
thread back. Every Django call of a request runs on its one thread (its database connection is
that thread's), in one context (contextvars set by the first call are seen by the second).

A process keeps as many threads as it ever had requests in flight at once, up to KEEP; a request
finding none idle starts one, as Django's handler would. So requests are never queued here: the
database pool (DB_POOL_MAX_SIZE, DB_POOL_TIMEOUT) still bounds how many query at once.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from django.core import signals
from django.core.exceptions import RequestAborted
from django.core.handlers.asgi import ASGIHandler, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.http import FileResponse, HttpResponseBase, StreamingHttpResponse
from django.urls import set_script_prefix

logger = logging.getLogger(__name__)

KEEP = 64  # idle threads kept per process; a thread beyond these ends with its request

_Call = tuple[
    Callable[..., Any], tuple[Any, ...], contextvars.Context, asyncio.AbstractEventLoop, "asyncio.Future[Any] | None"
]


def _settle(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.cancelled():  # the request's task was cancelled meanwhile: nobody waits for it
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class RequestThread:
    """A thread that runs the calls it is given, one after another, each in the context given."""

    def __init__(self, threads: RequestThreads, number: int) -> None:
        self._threads = threads
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=f"mnemo-request-{number}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while (call := self._calls.get()) is not None:
            function, args, context, loop, future = call
            try:
                result = context.run(function, *args)
            except BaseException as error:  # handed to the request's task, which raises it
                if future is None:  # finish(): nobody to hand it to
                    logger.exception("closing a response failed on its request thread")
                    continue
                loop.call_soon_threadsafe(_settle, future, None, error)
            else:
                if future is not None:
                    loop.call_soon_threadsafe(_settle, future, result, None)

    async def run(self, context: contextvars.Context, function: Callable[..., Any], *args: Any) -> Any:
        """Run function(*args) on this thread, in `context`, and return what it returns."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        self._calls.put((function, args, context, loop, future))
        return await future

    def finish(self, context: contextvars.Context, function: Callable[..., Any], *args: Any) -> None:
        """Run function(*args) on this thread, then give the thread back: nobody waits for it (it
        runs even when the request's task was cancelled)."""

        def last() -> None:
            try:
                function(*args)
            finally:
                self._threads.give_back(self)

        self._calls.put((last, (), context, asyncio.get_running_loop(), None))

    def stop(self) -> None:
        self._calls.put(None)


class RequestThreads:
    """The threads a process keeps for requests (see the module's doc)."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._idle: list[RequestThread] = []
        self._lock = threading.Lock()
        self._started = 0

    def borrow(self) -> RequestThread:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            self._started += 1
            number = self._started
        return RequestThread(self, number)

    def give_back(self, thread: RequestThread) -> None:
        with self._lock:
            if len(self._idle) < self._keep:
                self._idle.append(thread)
                return
        thread.stop()

    @property
    def started(self) -> int:
        """Threads started so far (tests)."""
        with self._lock:
            return self._started

    @property
    def idle(self) -> int:
        """Threads kept idle now (tests)."""
        with self._lock:
            return len(self._idle)


class KeptThreadASGIHandler(ASGIHandler):
    """Django's ASGI handler, each request's sync code run on a kept thread (see the module's doc).

    The middleware chain is loaded in sync mode and run as under WSGI: Django's own handler runs
    the middleware in async mode, where each step of each middleware written for both modes
    hops to the request's thread and back (18 hops for GET /api/v1/me, which took it from 3.1 to
    9.2 ms over HTTP on two cores). The views, the middleware and the database are all sync here;
    the MCP server (config.mcp) is served beside Django, not through this handler."""

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self.load_middleware(is_async=False)
        self.threads = RequestThreads()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:  # the client left before its body arrived
            return
        thread = self.threads.borrow()
        context = contextvars.copy_context()
        response: HttpResponseBase | None = None
        try:
            response = await thread.run(context, self._respond, scope, body_file)
            if isinstance(response, StreamingHttpResponse) and not response.is_async:
                # Each part read on the request's thread (a file, a generator using the database).
                response.streaming_content = _parts_on(thread, context, iter(response))
            await self.send_response(response, send)
        finally:
            # On the same thread, after the response: its close() sends request_finished (the
            # connection goes back to the pool, what waits for the response is done).
            thread.finish(context, _close, response, body_file)

    def _respond(self, scope: Any, body_file: Any) -> HttpResponseBase:
        set_script_prefix(get_script_prefix(scope))
        signals.request_started.send(sender=self.__class__, scope=scope)
        request, error_response = self.create_request(scope, body_file)
        if request is None:
            assert error_response is not None  # create_request returns one or the other
            return error_response
        response = self.get_response(request)
        response._handler_class = self.__class__  # type: ignore[attr-defined]
        if isinstance(response, FileResponse):
            response.block_size = self.chunk_size
        return response


def _close(response: HttpResponseBase | None, body_file: Any) -> None:
    try:
        if response is not None:
            response.close()
        else:
            signals.request_finished.send(sender=KeptThreadASGIHandler)
    finally:
        body_file.close()


async def _parts_on(
    thread: RequestThread, context: contextvars.Context, parts: Iterator[bytes]
) -> AsyncIterator[bytes]:
    done = object()
    while (part := await thread.run(context, next, parts, done)) is not done:
        yield part

"""Django under ASGI on kept request threads (config.request_threads): a request's sync code runs
on one thread, before and after its response, and the thread serves the next request."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import httpx
import pytest
from django.core import signals
from django.http import HttpResponse, StreamingHttpResponse
from django.test import override_settings
from django.urls import path

from config.request_threads import KeptThreadASGIHandler, RequestThreads
from tests.support.fixtures import run_async

SEEN: dict[str, list] = {}
MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="")
GATE = threading.Barrier(2, timeout=10)


def _plain(request):
    SEEN.setdefault("view", []).append(threading.get_ident())
    return HttpResponse("plain")


def _parts():
    for n in range(3):
        SEEN.setdefault("parts", []).append(threading.get_ident())
        yield f"part {n};".encode()


def _streamed(request):
    return StreamingHttpResponse(_parts())


def _broken(request):
    raise RuntimeError("the view failed")


def _meeting(request):
    GATE.wait()  # returns only once a second request is in its view at the same time
    return HttpResponse("met")


urlpatterns = [
    path("plain", _plain),
    path("streamed", _streamed),
    path("broken", _broken),
    path("meeting", _meeting),
]


@pytest.fixture
def app(monkeypatch):
    SEEN.clear()
    with override_settings(ROOT_URLCONF=__name__, DEBUG=False):
        handler = KeptThreadASGIHandler()
        yield handler


def _get(app, *paths: str, together: bool = False) -> list[httpx.Response]:
    """The responses to GET each path: one after another, each once the last one's thread is idle
    again (its close runs after the response), or all at once."""

    async def after_the_last() -> None:
        for _ in range(500):
            if app.threads.idle == app.threads.started:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("a request thread was never given back")

    async def scenario() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            if together:
                responses = list(await asyncio.gather(*(client.get(p) for p in paths)))
                await after_the_last()
                return responses
            responses = []
            for p in paths:
                responses.append(await client.get(p))
                await after_the_last()
            return responses

    return run_async(scenario)


def _record(name: str):
    def receiver(**kwargs):
        SEEN.setdefault(name, []).append(threading.get_ident())
        if name == "started":
            MARK.set("set when the request started")
        else:
            SEEN.setdefault("mark", []).append(MARK.get())

    return receiver


def test_requests_one_after_another_are_served_by_one_kept_thread(app):
    started, finished = _record("started"), _record("finished")
    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    try:
        responses = _get(app, "/plain", "/plain", "/plain")
    finally:
        signals.request_started.disconnect(started)
        signals.request_finished.disconnect(finished)
    assert [r.text for r in responses] == ["plain"] * 3
    assert app.threads.started == 1
    # request_started, the view and request_finished (the response's close) on that one thread,
    # which is not the event loop's; what the first call set in the request's context, the last sees.
    assert len(set(SEEN["started"] + SEEN["view"] + SEEN["finished"])) == 1
    assert SEEN["view"][0] != threading.get_ident()
    assert SEEN["mark"] == ["set when the request started"] * 3


def test_requests_in_flight_together_run_on_threads_of_their_own(app):
    responses = _get(app, "/meeting", "/meeting", together=True)
    assert [r.text for r in responses] == ["met", "met"]
    assert app.threads.started == 2
    _get(app, "/plain", "/plain", "/plain", together=True)
    assert app.threads.started == 3  # two were idle, a third was started


def test_a_streamed_response_is_read_part_by_part_on_the_request_thread(app):
    (response,) = _get(app, "/streamed")
    assert response.text == "part 0;part 1;part 2;"
    assert len(set(SEEN["parts"])) == 1
    assert SEEN["parts"][0] != threading.get_ident()


def test_a_failing_view_answers_500_and_gives_its_thread_back(app):
    responses = _get(app, "/broken", "/plain")
    assert [r.status_code for r in responses] == [500, 200]
    assert app.threads.started == 1


def test_idle_threads_beyond_the_kept_number_end():
    threads = RequestThreads(keep=1)
    first, second = threads.borrow(), threads.borrow()
    assert first is not second
    threads.give_back(first)
    threads.give_back(second)  # one is kept already: this one stops
    second._thread.join(timeout=5)
    assert not second._thread.is_alive()
    assert first._thread.is_alive()
    assert threads.borrow() is first

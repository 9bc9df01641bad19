"""The demo page (seed 001). Reading works without JavaScript; htmx updates it in place.

The demo is off unless DEMO_ENABLED (404 then), stores nothing for a visitor who only looks, and
takes at most DEMO_RATE requests per visitor address: each message costs model calls. A signed-in
login talks to it as its own person in the demo team, so what it keeps shows in that login's lens.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from config.ratelimit import Rate, client_address, count_request
from config.text import TextKind, text_problem
from curator import demo

TEMPLATE = "curator/demo_page.html"
MESSAGE_MAX_CHARS = 2000  # the form's maxlength; a longer message is refused, not cut
CHANGE = "demo_change"  # the session key of the last change, whose notices stay until the next one


def _identity(request: HttpRequest) -> demo.Identity | None:
    if request.user.is_authenticated:
        return demo.identity_for_user(request.user)
    visitor = request.session.get("demo_visitor")
    return demo.identity_for_visitor(visitor) if visitor else None


def _identity_for_writing(request: HttpRequest) -> demo.Identity:
    if request.user.is_authenticated:
        return demo.identity_for_user(request.user)
    # Each browser gets its own demo person, so visitors never see each other's memories. The
    # session (a row) is made only now, when the visitor says something.
    if "demo_visitor" not in request.session:
        request.session["demo_visitor"] = secrets.token_hex(8)
    return demo.identity_for_visitor(request.session["demo_visitor"])


def _last_change(request: HttpRequest) -> demo.Change | None:
    stored = request.session.get(CHANGE)
    if isinstance(stored, list) and len(stored) == 2 and all(isinstance(n, int) for n in stored):
        return (stored[0], stored[1])
    return None


def _render(request: HttpRequest, state: demo.DemoState, *, status: int = 200) -> HttpResponse:
    if state.change is not None and state.change != _last_change(request):
        request.session[CHANGE] = list(state.change)
    template = TEMPLATE + "#demo-body" if getattr(request, "htmx", False) else TEMPLATE
    return render(request, template, {"demo": state}, status=status)


def demo_view(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """404 unless DEMO_ENABLED; 429 with Retry-After past DEMO_RATE requests from one address."""

    @wraps(view)
    def guarded(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if not settings.DEMO_ENABLED:
            raise Http404("The demo is off on this server (DEMO_ENABLED).")
        rate = Rate.parse(settings.DEMO_RATE)
        wait = count_request(scope="demo", ident=client_address(request), rate=rate)
        if not wait:
            return view(request, *args, **kwargs)
        state = demo.peek(_identity(request), _last_change(request))
        state.error = (
            f"The demo takes at most {rate} from one address, and that is used up. "
            f"Try again in {wait} second{'s' if wait != 1 else ''}."
        )
        response = _render(request, state, status=429)
        response["Retry-After"] = str(wait)
        return response

    return guarded


@require_GET
@demo_view
def demo_page(request: HttpRequest) -> HttpResponse:
    return _render(request, demo.peek(_identity(request), _last_change(request)))


def _message_problem(text: str) -> str | None:
    if not text:
        return "Say something first."
    if len(text) > MESSAGE_MAX_CHARS:
        return f"Keep a message to {MESSAGE_MAX_CHARS:,} characters; this one has {len(text):,}."
    if problem := text_problem(text, TextKind.TEXT):
        return f"The message {problem}"
    return None


@require_POST
@demo_view
def demo_say(request: HttpRequest) -> HttpResponse:
    text = request.POST.get("message", "").strip()
    # Checked before anything is written: a refused message leaves no session, person or row behind.
    if problem := _message_problem(text):
        state = demo.peek(_identity(request), _last_change(request))
        state.error = problem
        return _render(request, state)
    return _render(request, demo.say(_identity_for_writing(request), text, _last_change(request)))


@require_POST
@demo_view
def demo_correct(request: HttpRequest, note_id: int) -> HttpResponse:
    who = _identity(request)
    text = request.POST.get("content", "").strip()
    if who is None:  # nothing said yet, so nothing kept to correct
        raise Http404("Nothing is kept about you yet.")
    if problem := _message_problem(text):
        state = demo.peek(who, _last_change(request))
        state.error = f"Not corrected: {problem[:1].lower()}{problem[1:]}"
        return _render(request, state)
    return _render(request, demo.correct(who, note_id, text, _last_change(request)))


@require_POST
@demo_view
def demo_delete(request: HttpRequest, note_id: int) -> HttpResponse:
    who = _identity(request)
    if who is None:
        raise Http404("Nothing is kept about you yet.")
    return _render(request, demo.delete(who, note_id, _last_change(request)))


@require_POST
@demo_view
def demo_new_conversation(request: HttpRequest) -> HttpResponse:
    demo.new_conversation(_identity(request))
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect("/demo/")
    return redirect("demo")

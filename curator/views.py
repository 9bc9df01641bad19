"""The demo page (seed 001). Reading works without JavaScript; htmx updates it in place."""

from __future__ import annotations

import secrets

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from curator import demo

TEMPLATE = "curator/demo_page.html"


def _visitor(request: HttpRequest) -> str:
    # Each browser gets its own demo person, so visitors never see each other's memories.
    if "demo_visitor" not in request.session:
        request.session["demo_visitor"] = secrets.token_hex(8)
    return request.session["demo_visitor"]


@require_GET
def demo_page(request: HttpRequest) -> HttpResponse:
    return render(request, TEMPLATE, {"demo": demo.state(_visitor(request))})


@require_POST
def demo_say(request: HttpRequest) -> HttpResponse:
    text = request.POST.get("message", "").strip()
    if not text:
        state = demo.state(_visitor(request))
        state.error = "Say something first."
    else:
        state = demo.say(_visitor(request), text[:2000])
    if not getattr(request, "htmx", False):
        return render(request, TEMPLATE, {"demo": state})
    return render(request, TEMPLATE + "#demo-body", {"demo": state})


@require_POST
def demo_new_conversation(request: HttpRequest) -> HttpResponse:
    demo.new_conversation(_visitor(request))
    if getattr(request, "htmx", False):
        return HttpResponseClientRedirect("/demo/")
    return redirect("demo")

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views.decorators.http import require_GET


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "home.html")


# --- error pages for people (the API answers in JSON: config/urls.py) ---------------------------

NOTE_GONE = {
    "lens-note": "This note no longer exists: it was deleted (here, by an agent, or it expired), or it is not one "
    "you can open.",
    "lens-note-edit": "This note was deleted elsewhere (in another tab, by an agent, or it expired), so your change "
    "was not saved.",
    "lens-note-delete": "This note was already deleted elsewhere (in another tab, by an agent, or it expired).",
}


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    match = request.resolver_match
    name = match.url_name if match is not None else None
    if name in NOTE_GONE:
        message = NOTE_GONE[name]
    elif name is not None and name.startswith("demo"):
        message = "The demo is off on this server; it runs with DEMO_ENABLED=1 (make run turns it on)."
    else:
        message = "Nothing here: the address may be mistyped, or what it pointed to is gone."
    return render(request, "error.html", {"title": "Not found", "message": message}, status=404)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Our own refusals say what may not be done and who may (memory.views READ_ONLY_SHARED).
    said = exception.args[0] if exception.args and isinstance(exception.args[0], str) else ""
    message = said or "You may not do this here."
    return render(request, "error.html", {"title": "Not allowed", "message": message}, status=403)


def server_error(request: HttpRequest) -> HttpResponse:
    # No request context: whatever failed (the database, say) must not fail this page too.
    context = {
        "title": "Something went wrong",
        "message": "Mnemo failed to handle this request; it is logged. Nothing you did caused it; try again in a moment.",
    }
    return HttpResponse(render_to_string("error.html", context), status=500)

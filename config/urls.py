from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from accounts.api import PersonRegisterApi, WhoAmIApi
from accounts.forms import LockoutAdminAuthenticationForm
from accounts.views import LoginView
from config import views
from config.errors import json_error_response
from config.health import healthz
from config.metrics import metrics_view
from curator import views as demo_views
from memory.api import PersonApi

# The most called first (an agent's /me at start-up, turns and their replies, then the tools): no two patterns match one path,
# so the order only decides how many are tried before the match.
api_v1: list[URLPattern | URLResolver] = [
    path("me", WhoAmIApi.as_view(), name="whoami"),
    path("", include("conversations.urls")),
    path("", include("memory.urls")),
    path("", include("webhooks.urls")),
    path("people", PersonRegisterApi.as_view(), name="people-register"),
    path("people/<path:external_id>", PersonApi.as_view(), name="people-detail"),
]

# The admin's sign-in gets the same lockout as the lens's.
admin.site.login_form = LockoutAdminAuthenticationForm

# The API first: Django tries the patterns in order, and an API call checked against every pattern
# of the lens before it (each miss recorded for a 404's debug page) spent about 4% of a web
# process's CPU under load on the lens's patterns alone. No pattern of the lens or the demo matches
# a path under api/v1/.
urlpatterns = [
    path("api/v1/", include(api_v1)),
    path("", views.home, name="home"),
    path("login/", LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("memory.lens_urls")),
    path("", include("conversations.lens_urls")),
    path("demo/", demo_views.demo_page, name="demo"),
    path("demo/say", demo_views.demo_say, name="demo-say"),
    path("demo/new", demo_views.demo_new_conversation, name="demo-new"),
    path("demo/fact/<int:note_id>/correct", demo_views.demo_correct, name="demo-correct"),
    path("demo/fact/<int:note_id>/delete", demo_views.demo_delete, name="demo-delete"),
    path("healthz", healthz, name="healthz"),
    path("metrics", metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    # Raised as BadRequest with the reason (memory.views.requested_id); the lens's refusals are plain text.
    message = str(exception) or "The request is malformed."
    if request.path.startswith("/api/"):
        return json_error_response(request, "invalid", message, 400)
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


def handler404(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return json_error_response(request, "not_found", f"Nothing at {request.path}.", 404)
    return views.page_not_found(request, exception)


def handler403(request: HttpRequest, exception: Exception) -> HttpResponse:
    if request.path.startswith("/api/"):
        return json_error_response(request, "permission_denied", "You may not do this.", 403)
    return views.permission_denied(request, exception)


def handler500(request: HttpRequest) -> HttpResponse:
    if request.path.startswith("/api/"):
        return json_error_response(request, "server_error", "Mnemo failed to handle this request; it is logged.", 500)
    return views.server_error(request)

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.http import HttpResponse

from accounts.forms import LockoutAuthenticationForm


class LoginView(auth_views.LoginView):
    """The Memory lens sign-in. A locked-out attempt answers 429 with Retry-After, and the form says when."""

    authentication_form = LockoutAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form: LockoutAuthenticationForm) -> HttpResponse:  # type: ignore[override]
        response = super().form_invalid(form)
        if form.lockout is not None:
            response.status_code = 429
            response["Retry-After"] = str(form.lockout.seconds)
        return response

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpResponse

from accounts.forms import LockoutAuthenticationForm


class LoginView(auth_views.LoginView):
    """The Memory lens sign-in. A locked-out attempt answers 429 with Retry-After, and the form says when."""

    authentication_form = LockoutAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        response = super().form_invalid(form)
        lockout = form.lockout if isinstance(form, LockoutAuthenticationForm) else None
        if lockout is not None:
            response.status_code = 429
            response["Retry-After"] = str(lockout.seconds)
        return response

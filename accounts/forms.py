from __future__ import annotations

from typing import Any

from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from accounts.lockout import Lockout, clear_login_failures, login_lockout, record_login_failure
from config.ratelimit import client_address


class LockoutAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, refusing while the username or the address is locked out (accounts.lockout)."""

    lockout: Lockout | None = None

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if not username or not self.cleaned_data.get("password"):
            return super().clean()  # a missing field is not a guess; the field errors say what to fill in
        address = client_address(self.request) if self.request is not None else "unknown"
        self.lockout = login_lockout(username=username, address=address)
        if self.lockout is not None:
            raise ValidationError(self.lockout.message, code="locked_out")
        try:
            cleaned = super().clean()
        except ValidationError:
            self.lockout = record_login_failure(username=username, address=address)
            if self.lockout is not None:
                raise ValidationError(self.lockout.message, code="locked_out") from None
            raise
        clear_login_failures(username=username)
        return cleaned


class LockoutAdminAuthenticationForm(LockoutAuthenticationForm, AdminAuthenticationForm):
    """The admin's sign-in form with the same lockout (staff accounts are worth guessing at too)."""

"""Sign-in lockout: repeated failures per username and per address stop further attempts for a while."""

from __future__ import annotations

import logging
import time

import pytest
from django.test import Client

from accounts.lockout import login_lockout

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture(autouse=True)
def _fast_hashing(settings):
    # Every guess that is not refused outright checks a password: keep that cheap here.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user("ada-login", password=PASSWORD)


def sign_in(client: Client, username: str, password: str):
    return client.post("/login/", {"username": username, "password": password})


def signed_in(client: Client) -> bool:
    return client.get("/lens/").status_code == 200


def test_wrong_passwords_lock_the_account_even_against_the_right_one(client, user, settings):
    assert settings.LOGIN_MAX_FAILURES == 10  # the default
    statuses = [sign_in(client, "ada-login", f"guess-{attempt}").status_code for attempt in range(25)]
    assert statuses == [200] * 9 + [429] * 16  # the tenth failure starts the lockout
    assert not signed_in(client)

    refused = sign_in(client, "ada-login", PASSWORD)
    assert refused.status_code == 429
    wait = int(refused["Retry-After"])
    assert 1 <= wait <= settings.LOGIN_LOCKOUT_SECONDS
    assert "Too many failed sign-in attempts for this account or from this address. Try again in 15 minutes." in (
        refused.content.decode()
    )
    assert not signed_in(client)


def test_the_attempt_that_starts_a_lockout_says_so_and_is_logged(client, user, settings, caplog):
    settings.LOGIN_MAX_FAILURES = 3
    assert sign_in(client, "ada-login", "nope").status_code == 200
    assert sign_in(client, "ada-login", "nope").status_code == 200
    with caplog.at_level(logging.WARNING, logger="accounts.lockout"):
        third = sign_in(client, "ada-login", "nope")
    assert third.status_code == 429
    assert "Try again in 15 minutes." in third.content.decode()
    locked = [record.getMessage() for record in caplog.records if record.name == "accounts.lockout"]
    assert locked == [
        "Sign-in locked for 900s: 3 failed attempts for username 'ada-login' from address 127.0.0.1 (locked by user)",
        "Sign-in locked for 900s: 3 failed attempts for username 'ada-login' from address 127.0.0.1 (locked by address)",
    ]


def test_the_address_limit_holds_across_usernames(user, settings):
    settings.LOGIN_MAX_FAILURES = 5
    guesser = Client(REMOTE_ADDR="203.0.113.9")
    for number in range(5):
        sign_in(guesser, f"someone-{number}", "password1")  # a different username each time

    refused = sign_in(guesser, "ada-login", PASSWORD)
    assert refused.status_code == 429
    assert not signed_in(guesser)

    elsewhere = Client(REMOTE_ADDR="198.51.100.7")
    assert sign_in(elsewhere, "ada-login", PASSWORD).status_code == 302
    assert signed_in(elsewhere)


def test_the_username_limit_holds_across_addresses(user, settings):
    settings.LOGIN_MAX_FAILURES = 5
    for number in range(5):
        sign_in(Client(REMOTE_ADDR=f"203.0.113.{number}"), "ada-login", "password1")

    fresh = Client(REMOTE_ADDR="198.51.100.7")
    refused = sign_in(fresh, "ADA-login", PASSWORD)  # case does not dodge it
    assert refused.status_code == 429
    assert not signed_in(fresh)


def test_a_successful_sign_in_clears_the_usernames_failures(client, user, settings):
    settings.LOGIN_MAX_FAILURES = 3
    for _ in range(2):
        sign_in(Client(REMOTE_ADDR="198.51.100.1"), "ada-login", "nope")
    assert sign_in(Client(REMOTE_ADDR="198.51.100.2"), "ada-login", PASSWORD).status_code == 302
    for _ in range(2):
        sign_in(Client(REMOTE_ADDR="198.51.100.3"), "ada-login", "nope")
    assert sign_in(client, "ada-login", PASSWORD).status_code == 302  # 4 failures in all, but 2 since the success
    assert signed_in(client)


def test_after_the_lockout_the_right_password_works_again(client, user, settings):
    settings.LOGIN_MAX_FAILURES = 2
    settings.LOGIN_LOCKOUT_SECONDS = 1
    sign_in(client, "ada-login", "nope")
    sign_in(client, "ada-login", "nope")
    assert sign_in(client, "ada-login", PASSWORD).status_code == 429

    deadline = time.monotonic() + 10
    while login_lockout(username="ada-login", address="127.0.0.1") is not None:
        assert time.monotonic() < deadline, "the lockout did not end within 10s of a 1s window"
        time.sleep(0.05)
    assert sign_in(client, "ada-login", PASSWORD).status_code == 302
    assert signed_in(client)


def test_missing_fields_are_not_counted_as_guesses(client, user, settings):
    settings.LOGIN_MAX_FAILURES = 2
    for _ in range(5):
        assert sign_in(client, "ada-login", "").status_code == 200
    assert login_lockout(username="ada-login", address="127.0.0.1") is None
    assert sign_in(client, "ada-login", PASSWORD).status_code == 302
    assert signed_in(client)


def test_the_admin_sign_in_is_locked_out_too(client, django_user_model, settings):
    django_user_model.objects.create_superuser("root", password=PASSWORD)
    settings.LOGIN_MAX_FAILURES = 3
    for _ in range(3):
        client.post("/admin/login/", {"username": "root", "password": "nope"})
    refused = client.post("/admin/login/", {"username": "root", "password": PASSWORD})
    assert "Too many failed sign-in attempts" in refused.content.decode()
    assert client.get("/admin/").status_code == 302  # still sent to the sign-in page

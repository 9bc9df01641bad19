"""Write paths for accounts: one function per use case."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from accounts import keycache
from accounts.exceptions import InvalidSlug, PersonIdTooLong, SlugTaken
from accounts.models import Agent, ApiKey, Membership, Person, Team
from config.prepared import columns_of, statement_cursor
from config.text import InvalidText, TextKind, check_text

KEY_SCHEME = "mnemo"
_KEY_PREFIX = re.compile(r"[A-Za-z0-9-]{1,16}")
# last_used_at is a hint for people auditing keys, not an audit log: writing it on every
# request would turn every read into a write, so it moves at most this often.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def hash_secret(secret: str) -> str:
    # The secret is 32 random bytes, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    plaintext: str  # shown to the caller once, never stored


def parse_key(raw: str) -> tuple[str, str] | None:
    """Split 'mnemo_<prefix>_<secret>' into (prefix, secret), or None when malformed."""
    parts = raw.split("_")
    if len(parts) != 3 or parts[0] != KEY_SCHEME or not parts[2]:
        return None
    if not _KEY_PREFIX.fullmatch(parts[1]):  # it is looked up: nothing Postgres cannot take (a NUL) gets there
        return None
    return parts[1], parts[2]


@transaction.atomic
def create_team(*, slug: str, name: str = "") -> Team:
    slug = slugify(slug)
    if not slug:
        raise InvalidSlug("A team needs a slug of letters, digits or dashes.", field="slug")
    if Team.objects.filter(slug=slug).exists():
        raise SlugTaken(f"A team with slug {slug!r} already exists.", field="slug")
    return Team.objects.create(slug=slug, name=name or slug)


@transaction.atomic
def add_member(*, team: Team, user: User, role: str = Membership.Role.MEMBER) -> Membership:
    membership, _ = Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return membership


@transaction.atomic
def create_agent(*, team: Team, slug: str, name: str = "", persona: str = "") -> Agent:
    slug = slugify(slug)
    if not slug:
        raise InvalidSlug("An agent needs a slug of letters, digits or dashes.", field="slug")
    if Agent.objects.filter(team=team, slug=slug).exists():
        raise SlugTaken(f"Team {team.slug} already has an agent {slug!r}.", field="slug")
    return Agent.objects.create(team=team, slug=slug, name=name or slug, persona=persona)


@transaction.atomic
def issue_api_key(*, agent: Agent, name: str = "", can_admin: bool = False) -> IssuedKey:
    secret = secrets.token_urlsafe(32).replace("_", "-")  # '_' separates the key's parts
    prefix = secrets.token_hex(6)
    api_key = ApiKey.objects.create(
        team=agent.team,
        agent=agent,
        name=name,
        prefix=prefix,
        secret_hash=hash_secret(secret),
        can_admin=can_admin,
    )
    return IssuedKey(api_key=api_key, plaintext=f"{KEY_SCHEME}_{prefix}_{secret}")


def revoke_api_key(*, api_key: ApiKey) -> ApiKey:
    if api_key.revoked_at is None:
        ApiKey.objects.filter(pk=api_key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
        keycache.accounts_changed()
        api_key.refresh_from_db(fields=["revoked_at"])
    return api_key


def authenticate_key(raw: str) -> ApiKey | None:
    """Return the active key matching raw, or None. Unknown, malformed and revoked keys look alike.

    A key this process verified recently is not looked up again while nothing in accounts changed
    (accounts.keycache says how that is known).
    """
    parsed = parse_key(raw)
    if parsed is None:
        return None
    prefix, secret = parsed
    digest = hash_secret(secret)
    entry = f"{prefix}:{digest}"
    match, mark = keycache.recall(entry)
    if match is None:
        candidates = ApiKey.objects.select_related("agent", "team").filter(prefix=prefix)
        match = next((key for key in candidates if hmac.compare_digest(key.secret_hash, digest)), None)
        if match is None or match.is_revoked:
            return None
        keycache.remember(entry, match, mark)
    now = timezone.now()
    if match.last_used_at is None or now - match.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=match.pk).update(last_used_at=now)
        match.last_used_at = now
        keycache.touch(entry, match)
    return match


def _person(team_id: int, external_id: str) -> Person | None:
    """The team's person of this id, read by hand: nearly every API call names a person, and the
    queryset's SQL took five times this read's CPU to build (0.55 against 0.08 ms, in process)."""
    people = columns_of(Person)
    with statement_cursor() as cursor:
        cursor.execute(
            f"SELECT {people.select} FROM {people.table} WHERE team_id = %s AND external_id = %s",
            [team_id, external_id],
        )
        row = cursor.fetchone()
    return None if row is None else people.instance(row)


def get_or_create_person(*, team: Team, external_id: str) -> Person:
    """People are created on first sight: agent platforms name them, Mnemo remembers them."""
    if not isinstance(external_id, str):
        raise InvalidText("person must be a string id.", field="person")
    external_id = check_text(external_id, field="person", kind=TextKind.IDENTIFIER).strip()
    if not external_id:
        raise InvalidText("person must be a non-empty id.", field="person")
    if len(external_id) > 200:
        raise PersonIdTooLong("person is longer than 200 characters.", field="person")
    person = _person(team.pk, external_id)
    if person is not None:
        return person
    try:
        with transaction.atomic():
            return Person.objects.create(team=team, external_id=external_id)
    except IntegrityError:  # another request created it between our read and our insert
        return Person.objects.get(team=team, external_id=external_id)


@transaction.atomic
def register_person(*, team: Team, external_id: str, display_name: str | None = None) -> tuple[Person, bool]:
    """Create the person if new; set the display name when one is given. Returns (person, created)."""
    check_text(external_id, field="person", kind=TextKind.IDENTIFIER)
    if display_name is not None:
        check_text(display_name, field="display_name", kind=TextKind.LINE)
    existed = Person.objects.filter(team=team, external_id=external_id.strip()).exists()
    person = get_or_create_person(team=team, external_id=external_id)
    if display_name is not None and person.display_name != display_name:
        Person.objects.filter(pk=person.pk).update(display_name=display_name)
        person.display_name = display_name
    return person, not existed


@transaction.atomic
def tombstone_person(*, person: Person) -> Person:
    """What is left of a person whose data was erased: their id (so the erasure stays accounted for), no name."""
    Person.objects.filter(pk=person.pk).update(display_name="", erased_at=timezone.now())
    person.refresh_from_db(fields=["display_name", "erased_at"])
    return person


@transaction.atomic
def delete_person(*, person: Person) -> None:
    """Delete the person row (an operator's hard delete, after their data was erased)."""
    Person.objects.filter(pk=person.pk).delete()


@transaction.atomic
def link_person_to_user(*, person: Person, user: User) -> Person:
    Person.objects.filter(pk=person.pk).update(user=user)
    person.refresh_from_db(fields=["user"])
    return person


@transaction.atomic
def ensure_owner_login(*, team: Team, username: str, password: str, role: str = Membership.Role.ADMIN) -> User:
    user_model = get_user_model()
    user, created = user_model.objects.get_or_create(username=username)
    if created or not user.check_password(password):
        # A lens login, not an admin one: Django's admin is not scoped to a team (README, "Getting in").
        user.set_password(password)
        user.save()
    add_member(team=team, user=user, role=role)
    return user

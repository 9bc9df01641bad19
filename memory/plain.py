"""What the lens and the demo say to people: banks, limits, removals and refusals in plain words.

The write path records its reasons for engineers (worths, addresses, latch states); the revision
log keeps them as they are and team admins still see them. A person reads these sentences instead.
They are built from the revision's fields and, where the reason is the one the bounded bank's
policy writes (memory/services/capacity.py), from the numbers in it; anything else is said as
recorded, never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import datetime

from memory.models import Bank, Revision

KIND_WORDS = {
    "identity": "fact about who you are",
    "preference": "preference",
    "fact": "fact",
    "ephemeral": "passing state",
    "page": "page",
    "daily": "daily note",
}

ACTOR_WORDS: dict[str, str] = {
    Revision.Actor.CURATOR: "The curator",
    Revision.Actor.CONSOLIDATION: "Tidying up",
    Revision.Actor.IMPORT: "An import",
    Revision.Actor.POLICY: "The memory's limit",
    Revision.Actor.EXPIRY: "Time",
    Revision.Actor.ADMIN: "A team admin",
}

_MAKE_ROOM = re.compile(r"make room for '(?P<key>[^']+)' \((?P<kind>\w+),")
_CAPACITY = re.compile(r"capacity (?:is |of )?(?P<capacity>\d+)")
_WORTH_LESS = re.compile(r"The new note '(?P<key>[^']+)' \((?P<kind>\w+), worth [^)]*\) is worth less than")
_MERGED_INTO = re.compile(r"^merged into '(?P<key>[^']+)'")
_EXPIRED_AT = re.compile(r"^expired at (?P<when>\S+)$")


def scope_words(scope: str) -> str:
    """`project:apollo` reads "project Apollo"; a scope without a type reads as it is."""
    kind, _, name = scope.partition(":")
    if not name:
        return scope
    return f"{kind} {name[:1].upper()}{name[1:]}"


def bank_title(bank: Bank, *, yours: bool, name: str) -> str:
    who = "you" if yours else name
    if bank.kind == Bank.Kind.SHARED:
        return f"Shared in {scope_words(bank.scope)}"
    if bank.kind == Bank.Kind.PRIVATE:
        return f"About {who} in {scope_words(bank.scope)}"
    return f"About {who}, everywhere"


def count_words(count: int, bank: Bank) -> str:
    return f"{count} of {bank.limit} note{'s' if bank.limit != 1 else ''}"


def limit_words(bank: Bank) -> str:
    """What happens when the bank fills up, without the engine's names for it."""
    if bank.policy == Bank.Policy.BOUNDED:
        return (
            f"It keeps at most {_things(str(bank.capacity))}: to learn something new when full, it forgets the least "
            "important one, or does not keep the new one when that matters less."
        )
    return (
        f"Past {bank.soft_limit} notes it is tidied up (similar notes merged); at {bank.hard_limit} it takes "
        "nothing new until something is removed."
    )


def _what(revision: Revision) -> str:
    """The removed note as a person knows it: its description while the log still has it."""
    description = (revision.before or {}).get("description")
    if isinstance(description, str) and description and not revision.erased:
        return f"“{description}” ({revision.note_key})"
    return revision.note_key or "a note"


def _things(count: str) -> str:
    return f"{count} thing" if count == "1" else f"{count} things"


def _kind_words(kind: str) -> str:
    return KIND_WORDS.get(kind, kind)


def who_did_it(revision: Revision, *, viewer: str, agent_names: Mapping[str, str]) -> str:
    if revision.actor == Revision.Actor.OWNER:
        return "You" if revision.actor_ref == f"user:{viewer}" else f"{revision.actor_ref.removeprefix('user:')}"
    if revision.actor == Revision.Actor.AGENT:
        return agent_names.get(revision.actor_ref, revision.actor_ref or "An agent")
    return ACTOR_WORDS.get(revision.actor, revision.actor)


def _when(iso: str) -> str:
    try:
        return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M")
    except ValueError:
        return iso


def removal_sentence(revision: Revision, *, viewer: str, agent_names: Mapping[str, str]) -> str:
    """Why a note is gone, as a sentence: deleted, forgotten, evicted, expired or merged."""
    what = _what(revision)
    who = who_did_it(revision, viewer=viewer, agent_names=agent_names)
    reason = revision.reason
    if revision.action == Revision.Action.EVICT:
        capacity = _CAPACITY.search(reason)
        keeps = f"it keeps at most {_things(capacity['capacity'])}" if capacity else "it was full"
        if room := _MAKE_ROOM.search(reason):
            return (
                f"Forgot {what} to make room for a new {_kind_words(room['kind'])}: {keeps} and this was the "
                "least important."
            )
        return f"Forgot {what}: {keeps} and this was the least important."
    if revision.action == Revision.Action.MERGE:
        into = _MERGED_INTO.search(reason)
        return f"Merged {what} into {into['key'] if into else 'another note'} while tidying up similar notes."
    if revision.actor == Revision.Actor.EXPIRY:
        expired = _EXPIRED_AT.search(reason)
        return (
            f"{what[:1].upper()}{what[1:]} expired"
            + (f" at {_when(expired['when'])}" if expired else "")
            + (": it was only meant to last a while.")
        )
    if revision.erased or reason == "erased on the person's request":
        # Not even its key: a key can be built from what the note said (preference-cnrycake-pastries).
        return f"{who} deleted a note; what it said is erased."
    if revision.actor == Revision.Actor.AGENT:
        because = "" if reason in ("", "forgotten on request") else f": {reason}"
        return f"{who} forgot {what} when asked to{because}."
    return f"{who} deleted {what}" + (f": {reason}." if reason and not reason.startswith("deleted by") else ".")


def refusal_sentence(revision: Revision, *, viewer: str, agent_names: Mapping[str, str]) -> str:
    """Why something was not kept or not changed, as a sentence."""
    who = who_did_it(revision, viewer=viewer, agent_names=agent_names)
    reason = revision.reason.rstrip(".")
    if worth := _WORTH_LESS.search(revision.reason):
        capacity = _CAPACITY.search(revision.reason)
        keeps = f"it keeps at most {_things(capacity['capacity'])}" if capacity else "it is full"
        return (
            f"Did not keep a new {_kind_words(worth['kind'])} ({worth['key']}): {keeps}, and everything it holds "
            "matters more."
        )
    target = revision.note_key or "a note"
    return f"Did not save what {who if who != 'You' else 'you'} wrote to {target}: {reason}."


# The fields of a LangGraph store item's value that hold its words, in the order they are looked for.
_STORE_TEXT_FIELDS = ("text", "content", "memory", "description", "summary", "note", "fact")


def note_text(content: str) -> str:
    """A note's content as a person reads it. A LangGraph store's item, which mnemo_client.langgraph
    writes as `{"key": ..., "value": {...}}`, is its value's words (its text, content or description),
    or each plain field of the value on a line of its own; any other content is shown as it is."""
    if not content.startswith("{"):
        return content
    try:
        item = json.loads(content)
    except ValueError:
        return content
    if not isinstance(item, dict) or set(item) != {"key", "value"}:
        return content
    value = item["value"]
    if isinstance(value, str):
        return value
    if not isinstance(value, dict):
        return content
    for field in _STORE_TEXT_FIELDS:
        text = value.get(field)
        if isinstance(text, str) and text.strip():
            return text
    lines = [
        f"{str(name).replace('_', ' ')}: {field_value}"
        for name, field_value in value.items()
        if isinstance(field_value, str | int | float | bool) and str(field_value).strip()
    ]
    return "\n".join(lines) or content

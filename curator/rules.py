"""The offline `rules` provider: common personal facts in English, and duplicate merges.

Keys come from a fixed vocabulary (name, home-city, employer, allergy-<x>, diet, pet-<name>,
preference-<thing>, current-state), because everything here rests on the key: a correction must
land on top of the original, not beside it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, cast

from curator.schemas import ConsolidationPlan, CuratorPlan, Drop, ForgetOp, Merge, NoteKind, RememberOp
from memory.text import normalize_key

if TYPE_CHECKING:
    from curator.providers import ConsolidationRequest, CurationRequest

# A capitalised name ends at punctuation or at the next lowercase word ("Bergen last week").
_END = r"(?=[.,!?;:]|$|\s+[a-z])"
# A lowercase phrase ends at punctuation or at a joining word ("peanuts and ...").
_END_PHRASE = r"(?=[.,!?;:]|$|\s+(?:and|but|with|since|now|because|for|so|too|when|if)\b)"
_PLACE = r"([A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})"
_ORG = r"([A-Z][\w&'.-]*(?:\s+[A-Z&][\w&'.-]*){0,3})"

NAME = [
    re.compile(r"\b(?i:my name)(?:'s| is)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)"),
    re.compile(r"\b(?i:call me|I am called|I'm called)\s+([A-Z][\w'-]+)"),
    re.compile(r"^(?:hi|hello|hey)[,!.]?\s+(?:there[,!.]?\s+)?(?:I'm|I am)\s+([A-Z][\w'-]+)", re.IGNORECASE),
]
MOVED = re.compile(r"\bI(?:'ve| have)?\s+(?:just\s+|recently\s+)?moved\s+to\s+" + _PLACE + _END)
LIVES = re.compile(r"\bI\s+(?:live|am living|'m living|currently live)\s+in\s+" + _PLACE + _END)
LEFT_JOB = re.compile(
    r"\bI\s+(?:just\s+)?(?:left|quit|resigned from|was laid off from|got laid off from|was fired from|no longer work (?:at|for))\s+"
    + _ORG
    + _END
)
WORKS = re.compile(r"\bI\s+(?:work|am working|'m working|started working)\s+(?:at|for)\s+" + _ORG + _END)
ALLERGY = [
    re.compile(
        r"\b(?:I'm|I am)\s+(?:severely\s+|very\s+)?allergic\s+to\s+([a-z][\w -]{1,40}?)" + _END_PHRASE, re.IGNORECASE
    ),
    re.compile(r"\bI\s+have\s+an?\s+([a-z][\w-]{1,30})\s+allergy\b", re.IGNORECASE),
]
DIET = re.compile(
    r"\b(?:I'm|I am)\s+(?:a\s+)?(vegetarian|vegan|pescatarian|diabetic|coeliac|celiac|lactose intolerant|gluten intolerant)\b",
    re.IGNORECASE,
)
PET = re.compile(
    r"\bI\s+have\s+an?\s+(dog|cat|puppy|kitten|parrot|rabbit|hamster|horse)\s+(?:named|called)\s+([A-Z]\w+)"
)
PREFERENCE = re.compile(
    r"\bI\s+(?:really\s+|absolutely\s+)?(love|like|enjoy|adore|prefer|hate|dislike|can't stand|cannot stand|don't like|do not like)\s+"
    r"([a-z][\w' -]{1,50}?)" + _END_PHRASE,
    re.IGNORECASE,
)
STATE = re.compile(
    r"\b(?:I'm|I am)\s+(?:currently\s+|right now\s+|just\s+)?"
    r"(on (?:the|a) (?:train|bus|plane|flight|ferry|tram|subway)|at the (?:airport|station|gym|office|doctor's|dentist)"
    r"|in a meeting|driving|stuck in traffic|eating (?:a |an |some )?[a-z]+|tired|hungry|sick|exhausted|stressed|jet-lagged)\b",
    re.IGNORECASE,
)
NEGATIVE = {"hate", "dislike", "can't stand", "cannot stand", "don't like", "do not like"}
SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def _clean(value: str) -> str:
    return value.strip().rstrip(".,!?;:").strip()


def _facts(text: str) -> list[RememberOp | ForgetOp]:
    text = text.replace("\u2019", "'")  # typographic apostrophes, as phones type them
    ops: list[RememberOp | ForgetOp] = []

    def remember(
        key: str,
        description: str,
        content: str,
        kind: NoteKind = "fact",
        *,
        category: str | None = None,
        expires_in_hours: float | None = None,
    ) -> None:
        ops.append(
            RememberOp(
                op="remember", key=key, description=description, content=content, kind=kind, category=category,
                expires_in_hours=expires_in_hours,
            )
        )  # fmt: skip

    for pattern in NAME:
        if match := pattern.search(text):
            name = _clean(match.group(1))
            remember("name", "The person's name", f"Their name is {name}.", "identity")
            break
    if match := MOVED.search(text):
        remember("home-city", "Where the person lives", f"Lives in {_clean(match.group(1))} (moved there).")
    elif match := LIVES.search(text):
        remember("home-city", "Where the person lives", f"Lives in {_clean(match.group(1))}.")
    if match := LEFT_JOB.search(text):
        remember("employer", "Where the person works", f"Left {_clean(match.group(1))}; no current employer known.")
    elif match := WORKS.search(text):
        remember("employer", "Where the person works", f"Works at {_clean(match.group(1))}.")
    for pattern in ALLERGY:
        for match in pattern.finditer(text):
            thing = _clean(match.group(1)).lower()
            remember(
                f"allergy-{normalize_key(thing)}"[:64], f"Allergic to {thing}", f"Allergic to {thing}.", "identity",
                category="health",
            )  # fmt: skip
    if match := DIET.search(text):
        diet = match.group(1).lower()
        remember("diet", "Dietary constraint", f"Is {diet}.", "identity", category="health")
    if match := PET.search(text):
        animal, name = match.group(1).lower(), match.group(2)
        remember(f"pet-{normalize_key(name)}", f"Their {animal}", f"Has a {animal} named {name}.")
    for match in PREFERENCE.finditer(text):
        verb, thing = match.group(1).lower(), _clean(match.group(2))
        thing = re.sub(r"^(?:to|the|a|an)\s+", "", thing, flags=re.IGNORECASE)
        if not thing or normalize_key(thing) in {"it", "that", "this", "you", "them"}:
            continue
        liked = verb not in NEGATIVE
        remember(
            f"preference-{normalize_key(thing)}"[:64],
            f"How the person feels about {thing}"[:200],
            f"{'Likes' if liked else 'Dislikes'} {thing}.",
            "preference",
            category="preferences",
        )
    if match := STATE.search(text):
        remember(
            "current-state", "What the person is doing right now", f"Is {_clean(match.group(1))}.", "ephemeral",
            expires_in_hours=6,
        )  # fmt: skip
    return ops


def extract_plan(request: CurationRequest) -> CuratorPlan:
    operations: dict[str, RememberOp | ForgetOp] = {}
    said: list[str] = []
    for line in request.messages:
        if line.role != "person":
            continue
        for sentence in SENTENCE.split(line.text):
            for op in _facts(sentence):
                if isinstance(op, RememberOp) and line.id is not None:
                    op.sources = [line.id]  # the message the fact came from
                operations[op.key] = op  # the latest statement about a key wins within a pass
                if isinstance(op, RememberOp):
                    said.append(op.content)
    summary_parts = [request.summary.strip()] if request.summary.strip() else []
    summary_parts.extend(said)
    summary = " ".join(summary_parts)
    while len(summary) > 1500 and len(summary_parts) > 1:  # the oldest part of a derived summary goes first
        summary_parts.pop(0)
        summary = " ".join(summary_parts)
    return CuratorPlan(operations=list(operations.values()), summary=summary[:1500] or None)


def _fingerprint(note: dict[str, object]) -> tuple[str, str, str]:
    words = re.sub(r"[^\w\s]", " ", str(note["content"]).lower()).split()
    semantics = cast("list[str]", note.get("semantics") or [])  # a note's semantics are ontology ids
    return " ".join(words), repr(note.get("scope_refs") or {}), repr(sorted(semantics))


def merge_duplicates_plan(request: ConsolidationRequest) -> ConsolidationPlan:
    """Merge exact and near-exact duplicates (same words, ignoring case and punctuation) only."""
    groups: dict[tuple[str, str, str], list[dict[str, object]]] = defaultdict(list)
    for note in request.notes:
        groups[_fingerprint(note)].append(note)
    merges = []
    for notes in groups.values():
        if len(notes) > 1:
            newest = max(notes, key=lambda n: str(n["updated_at"]))
            merges.append(
                Merge(
                    keep=str(newest["key"]),
                    absorb=[str(n["key"]) for n in notes if n is not newest],
                    content=str(newest["content"]),
                )
            )
    return ConsolidationPlan(merges=merges, forgets=list[Drop]())

"""The offline `rules` provider: common personal facts in English, what the person takes back, and
duplicate merges.

Keys come from a fixed vocabulary (name, home-city, employer, allergy-<x>, diet, pet-<name>,
preference-<thing>, current-state), because everything here rests on the key: a correction must
land on top of the original, not beside it. A retraction (curator.retractions) lands on the lines
of the known notes that state what was taken back, whoever wrote them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import TYPE_CHECKING, cast

from curator.retractions import (
    ANYMORE,
    END,
    END_PHRASE,
    ORG,
    PLACE,
    Retraction,
    find_retractions,
    plain_statement,
)
from curator.schemas import (
    ConsolidationPlan,
    CuratorPlan,
    Drop,
    EditOp,
    ForgetOp,
    Merge,
    NoteKind,
    RememberOp,
)
from memory.text import normalize_key

if TYPE_CHECKING:
    from curator.providers import ConsolidationRequest, CurationRequest, KnownNote

NAME = [
    re.compile(r"\b(?i:my name)(?:'s| is)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)"),
    re.compile(r"\b(?i:call me|I am called|I'm called)\s+([A-Z][\w'-]+)"),
    re.compile(r"^(?:hi|hello|hey)[,!.]?\s+(?:there[,!.]?\s+)?(?:I'm|I am)\s+([A-Z][\w'-]+)", re.IGNORECASE),
]
MOVED = re.compile(
    r"\bI(?:'ve| have)?\s+(?:just\s+|recently\s+)?moved\s+(?:(?:from|out of|away from)\s+"
    + PLACE
    + r"\s+)?to\s+"
    + PLACE
    + END
)
LIVES = re.compile(r"\bI\s+(?:live|am living|'m living|currently live)\s+in\s+" + PLACE + END)
WORKS = re.compile(
    r"\b(?:I\s+(?:now\s+)?(?:work|am working|am now working|started working)|I'm\s+(?:now\s+)?working"
    r"|and\s+now\s+work)\s+(?:at|for)\s+" + ORG + END
)
EMPLOYER = "Where the person works"
# The employer note once a job is left; "Works at X." is how the rules write the employer.
LEFT = "Left {}; no current employer known."
_WORKS_AT = re.compile(r"^Works at (.+?)\.?$")
ALLERGY = [
    re.compile(
        r"\b(?:I'm|I am)\s+(?:severely\s+|very\s+)?allergic\s+to\s+([a-z][\w -]{1,40}?)" + END_PHRASE, re.IGNORECASE
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
    r"([a-z][\w' -]{1,50}?)" + END_PHRASE,
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


def _facts(text: str) -> list[RememberOp]:
    ops: list[RememberOp] = []

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
        remember("home-city", "Where the person lives", f"Lives in {_clean(match.group(2))} (moved there).")
    elif match := LIVES.search(text):
        remember("home-city", "Where the person lives", f"Lives in {_clean(match.group(1))}.")
    if (match := WORKS.search(text)) and plain_statement(text, match):
        remember("employer", EMPLOYER, f"Works at {_clean(match.group(1))}.")
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
        if re.match(r"\s+" + ANYMORE, text[match.end() :]):
            continue  # "I don't like X anymore" takes a liking back (curator.retractions); it states none
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


class _Pass:
    """What one pass learns, sentence by sentence: each known note's lines as they stand now, the
    latest remember per key, and what changed each key (for the revision log's reason)."""

    def __init__(self, notes: list[KnownNote]) -> None:
        # A curated page and a day's note are accounts of what happened, not standing claims: a
        # retraction does not rewrite them.
        self.known = {n.key: n.content for n in notes if n.kind not in {"page", "daily"}}
        self.lines = {key: content.splitlines() for key, content in self.known.items()}
        self.remembered: dict[str, RememberOp] = {}
        self.why: dict[str, list[tuple[int | None, str | None]]] = defaultdict(list)  # (message, topic)
        self.dropped: list[str] = []  # lines taken back or replaced, for the summary

    def retract(self, retraction: Retraction, source: int | None) -> bool:
        """Take out the lines that state what was retracted; whether any did."""
        if not retraction.removes:
            return any(retraction.contradicts(line) for lines in self.lines.values() for line in lines)
        hit = False
        for key, lines in list(self.lines.items()):
            kept = [line for line in lines if not retraction.contradicts(line)]
            if kept == lines:
                continue
            hit = True
            self.because(key, source, retraction.topic)
            left = next((m.group(1) for line in lines if (m := _WORKS_AT.match(line.strip()))), retraction.employer)
            if key == "employer" and retraction.topic == "employer" and left:
                self.remember(_employer_left(left), source)  # the note says the job was left, as "I left X" does
                continue
            self.dropped.extend(line for line in lines if line not in kept)
            self.lines[key] = kept
            self.remembered.pop(key, None)
        return hit

    def remember(self, op: RememberOp, source: int | None) -> None:
        if source is not None:
            op.sources = [source]  # the message the fact came from
        if op.key in self.known and self.lines.get(op.key) != [op.content]:
            self.because(op.key, source, None)  # a correction
        self.dropped.extend(line for line in self.lines.get(op.key, []) if line != op.content)
        self.lines[op.key] = [op.content]
        self.remembered[op.key] = op

    def no_longer_true(self) -> set[str]:
        """What was said of the person before (or earlier in the pass) and no longer stands."""
        standing = {line for lines in self.lines.values() for line in lines}
        return {line.strip() for line in self.dropped if line not in standing and line.strip()}

    def because(self, key: str, source: int | None, topic: str | None) -> None:
        if (source, topic) not in self.why[key]:
            self.why[key].append((source, topic))

    def reason(self, key: str, done: str) -> str:
        # The message's id and the topic, never its words: erasing the message must leave no copy
        # of them in the log (the note's own content is the log's to keep, or to erase with it).
        ids = list(dict.fromkeys(str(pk) for pk, _ in self.why[key] if pk is not None))
        topics = list(dict.fromkeys(topic for _, topic in self.why[key] if topic))
        where = f" in message{'s' if len(ids) > 1 else ''} {', '.join(ids)}" if ids else ""
        return f"{done} by the person{where}" + (f" ({', '.join(topics)})" if topics else "")

    def operations(self) -> list[RememberOp | EditOp | ForgetOp]:
        ops: list[RememberOp | EditOp | ForgetOp] = []
        for key in dict.fromkeys([*self.remembered, *self.why]):
            if (op := self.remembered.get(key)) is not None:
                if key in self.known and self.known[key] != op.content and self.why[key]:
                    op.reason = self.reason(key, "changed")
                ops.append(op)
            elif key in self.known and self.lines[key] != self.known[key].splitlines():
                if not any(line.strip() for line in self.lines[key]):
                    ops.append(ForgetOp(op="forget", key=key, reason=self.reason(key, "taken back")))
                else:
                    # The whole content as found: if the note changed since it was read, the edit
                    # is refused rather than applied to text nobody checked.
                    sources = list(dict.fromkeys(pk for pk, _ in self.why[key] if pk is not None))
                    ops.append(
                        EditOp(
                            op="edit", key=key, find=self.known[key], content="\n".join(self.lines[key]),
                            reason=self.reason(key, "taken back"), sources=sources,
                        )
                    )  # fmt: skip
        return ops


def _employer_left(name: str) -> RememberOp:
    return RememberOp(op="remember", key="employer", description=EMPLOYER, content=LEFT.format(_clean(name)))


def extract_plan(request: CurationRequest) -> CuratorPlan:
    found = _Pass(request.notes)
    said: list[str] = []
    for line in request.messages:
        if line.role != "person":
            continue
        text = line.text.replace("\u2019", "'")  # typographic apostrophes, as phones type them
        for sentence in SENTENCE.split(text):
            home_retracted = False
            for retraction in find_retractions(sentence):
                hit = found.retract(retraction, line.id)
                home_retracted |= hit and retraction.topic == "home"
                if (
                    retraction.records_left and retraction.employer and not hit and not home_retracted
                    and "employer" not in found.lines
                ):  # fmt: skip
                    # "I left Acme" is news even when no employer was known ("I left Oslo" is not).
                    found.remember(_employer_left(retraction.employer), line.id)
            for op in _facts(sentence):
                found.remember(op, line.id)  # the latest statement about a key wins within a pass
                said.append(op.content)
    operations = found.operations()
    said.extend(op.content for op in operations if isinstance(op, RememberOp) and op.content not in said)
    # The summary this provider wrote is the facts' own sentences: one no longer true leaves it too,
    # or every later turn would still be told it.
    gone = found.no_longer_true()
    earlier = request.summary
    for statement in gone:
        earlier = earlier.replace(statement, "")
    earlier = " ".join(earlier.split())
    summary_parts = [earlier] if earlier else []
    summary_parts.extend(statement for statement in said if statement not in gone)
    summary = " ".join(summary_parts)
    while len(summary) > 1500 and len(summary_parts) > 1:  # the oldest part of a derived summary goes first
        summary_parts.pop(0)
        summary = " ".join(summary_parts)
    return CuratorPlan(operations=list(operations), summary=summary[:1500] or None)


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

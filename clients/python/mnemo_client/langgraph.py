"""A LangGraph store on Mnemo: `MnemoStore` implements `langgraph.store.base.BaseStore` on banks and notes.

    pip install "mnemo-client[langgraph]"

    from mnemo_client.langgraph import MnemoStore

    store = MnemoStore(base_url="http://127.0.0.1:8000", api_key="mnemo_...")   # or MNEMO_URL / MNEMO_KEY
    graph = builder.compile(checkpointer=..., store=store)

The mapping (namespaces mirror Mnemo's bank ids, `root` being "user" unless you pass another):

- `(root, person)` is the person's global bank `user:<person>` (what is known about them everywhere);
- `(root, person, *scope)` is their private bank in the scope made of the other labels joined with
  ":": `("user", "ada", "project", "apollo")` is `user:ada:project:apollo`. A scope label may not
  contain ":" (the namespace would not come back the same from list_namespaces).
- Shared banks (`scope:<scope>`) have no namespace here: Mnemo writes to them on behalf of a
  person; use `Mnemo.remember(bank="shared", ...)` for those.
- An item is one note. Its key becomes the note key: a key that is already a slug (`home-city`)
  is used as it is; any other key (`"Home City"`, a UUID with capitals, a path) becomes a readable
  slug plus a hash of the key (`home-city-5f1c0e2a9b3d`), so two keys never share a note. The note's
  content is the JSON `{"key": <the item's key>, "value": <the item's value>}`, which keeps the key
  exactly; its description is the value's "description" when it is a string, else `LangGraph item
  "<key>"`. The caps hold: a value whose JSON passes 2,000 characters is refused (TooLong), never cut.
- Notes written by anything else (the curator, the remember tools, the lens) are items too, under
  their note key, with the value `{"content", "description", "kind", "category"}`.
- `search(prefix, query=...)` ranks with Mnemo's recall (BM25 fused with vectors, at most 50
  candidates per bank) and returns its score; without a query, items come newest first. `filter`
  is applied here, on the values, with the operators $eq, $ne, $gt, $gte, $lt, $lte.
- Every note is indexed by Mnemo, so `put(..., index=...)` changes nothing; TTLs are not supported
  (Mnemo never forgets implicitly: a note stays until it is deleted).

Each operation is a few API calls (a get lists the bank's notes, which Mnemo caps at its hard
limit); a batch lists each bank once and runs its operations in order.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import unicodedata
from collections.abc import Callable, Generator, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from mnemo_client._async import AsyncMnemo
from mnemo_client._core import Call, query, segment, tool_call
from mnemo_client._sync import Mnemo
from mnemo_client.errors import MnemoError, NotFound
from mnemo_client.types import Bank, Note

__all__ = ["MnemoStore", "note_key"]

KEY_MAX = 64
DESCRIPTION_MAX = 200
RECALL_LIMIT = 50  # the most recall_memories returns for one call
PAGE_SIZE = 200  # the server's default API_MAX_PAGE_SIZE
_SLUG = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_NON_SLUG = re.compile(r"[^a-z0-9]+")

# A plan is a generator that yields API calls and is sent their results (or thrown their errors):
# the store's logic is written once, and batch() and abatch() only differ in how they send.
Plan = Generator[Call, Any, Any]


def note_key(key: str) -> str:
    """The note key an item key is stored under: the key itself when it is a slug, else a slug plus a hash."""
    if _SLUG.fullmatch(key) and len(key) <= KEY_MAX:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    ascii_text = unicodedata.normalize("NFKD", key).encode("ascii", "ignore").decode().lower()
    stem = _NON_SLUG.sub("-", ascii_text).strip("-")[: KEY_MAX - len(digest) - 1].strip("-")
    return f"{stem or 'item'}-{digest}"


@dataclass(frozen=True)
class _BankRef:
    bank_id: str
    person: str
    scope: str


@dataclass
class _Batch:
    """What one batch has read so far: each bank's notes are listed once, and forgotten when written."""

    notes: dict[str, list[Note]] = field(default_factory=dict)
    banks: list[Bank] | None = None


class MnemoStore(BaseStore):
    """LangGraph's BaseStore on Mnemo banks and notes; see the module's docstring for the mapping.

    Give it a client (`Mnemo`, and `AsyncMnemo` for async graphs), or base_url/api_key (or
    MNEMO_URL/MNEMO_KEY) to make both. With only a sync client, async calls run it in a thread.
    """

    supports_ttl = False

    def __init__(
        self,
        client: Mnemo | None = None,
        *,
        async_client: AsyncMnemo | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        root: str = "user",
    ) -> None:
        if not root or "." in root:
            raise ValueError("root must be a non-empty namespace label without '.', e.g. 'user'.")
        if client is None and async_client is None:
            client = Mnemo(base_url, api_key=api_key)
            async_client = AsyncMnemo(base_url, api_key=api_key)
        self.client = client
        self.async_client = async_client
        self.root = root

    # --- BaseStore --------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if self.client is None:
            raise RuntimeError(
                "This MnemoStore has only an AsyncMnemo: use the async methods, or pass client=Mnemo(...)."
            )
        return self._drive(self._plan(list(ops)))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        plan = self._plan(list(ops))
        if self.async_client is None:
            return await asyncio.to_thread(self._drive, plan)
        try:
            call = next(plan)
            while True:
                try:
                    result = await self.async_client.request(call)
                except MnemoError as error:
                    call = plan.throw(error)
                else:
                    call = plan.send(result)
        except StopIteration as done:
            results: list[Result] = done.value
            return results

    def _drive(self, plan: Plan) -> list[Result]:
        assert self.client is not None
        try:
            call = next(plan)
            while True:
                try:
                    result = self.client.request(call)
                except MnemoError as error:
                    call = plan.throw(error)
                else:
                    call = plan.send(result)
        except StopIteration as done:
            results: list[Result] = done.value
            return results

    # --- the plan -----------------------------------------------------------------------------

    def _plan(self, ops: list[Op]) -> Plan:
        for op in ops:
            validate_op_namespace(op)
        seen = _Batch()
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append((yield from self._get(seen, op)))
            elif isinstance(op, PutOp):
                yield from self._put(seen, op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append((yield from self._search(seen, op)))
            elif isinstance(op, ListNamespacesOp):
                results.append((yield from self._list_namespaces(seen, op)))
            else:
                raise TypeError(f"MnemoStore does not know the operation {type(op).__name__}.")
        return results

    def _get(self, seen: _Batch, op: GetOp) -> Plan:
        bank = self.bank_for(op.namespace)
        for note in (yield from self._notes(seen, bank.bank_id)):
            item = self._item(op.namespace, note)
            if item.key == op.key:
                return item
        return None

    def _put(self, seen: _Batch, op: PutOp) -> Plan:
        bank = self.bank_for(op.namespace)
        if op.value is None:
            for note in (yield from self._notes(seen, bank.bank_id)):
                if self._item(op.namespace, note).key == op.key:
                    with suppress(NotFound):  # deleted meanwhile: the outcome asked for
                        yield Call("DELETE", f"/api/v1/notes/{segment(note['id'])}")
            seen.notes.pop(bank.bank_id, None)
            seen.banks = None
            return
        value = dict(op.value)
        content = json.dumps({"key": op.key, "value": value}, ensure_ascii=False)
        args = {
            "person": bank.person,
            "scope": bank.scope or None,
            "bank": "private" if bank.scope else "global",
            "key": note_key(op.key),
            "description": _description(op.key, value),
            "content": content,
        }
        yield tool_call("remember", args)
        seen.notes.pop(bank.bank_id, None)
        seen.banks = None

    def _search(self, seen: _Batch, op: SearchOp) -> Plan:
        banks = [b for b in (yield from self._banks(seen)) if _starts_with(self._namespace(b), op.namespace_prefix)]
        found: list[SearchItem] = []
        for bank in banks:
            namespace = self._namespace(bank)
            notes = yield from self._notes(seen, bank["id"])
            scores: dict[int, float] | None = None
            if op.query:
                ranked = yield tool_call(
                    "recall_memories",
                    {
                        "person": bank["person"],
                        "scope": bank["scope"] or None,
                        "query": op.query,
                        "limit": RECALL_LIMIT,
                    },
                )
                scores = {hit["id"]: hit["score"] for hit in ranked["results"] if hit["bank"] == bank["id"]}
            for note in notes:
                if scores is not None and note["id"] not in scores:
                    continue
                item = self._item(namespace, note)
                if op.filter and not _matches(item.value, op.filter):
                    continue
                score = scores[note["id"]] if scores is not None else None
                found.append(_search_item(item, score))
        if op.query:
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
        else:
            found.sort(key=lambda item: item.updated_at, reverse=True)
        return found[op.offset : op.offset + op.limit]

    def _list_namespaces(self, seen: _Batch, op: ListNamespacesOp) -> Plan:
        namespaces = {self._namespace(bank) for bank in (yield from self._banks(seen))}
        matching = [ns for ns in namespaces if all(_condition_holds(c, ns) for c in op.match_conditions or ())]
        if op.max_depth is not None:
            matching = list({ns[: op.max_depth] for ns in matching})
        return sorted(matching)[op.offset : op.offset + op.limit]

    # --- reads shared by the operations ----------------------------------------------------------

    def _notes(self, seen: _Batch, bank_id: str) -> Plan:
        if bank_id not in seen.notes:
            notes: list[Note] = []
            offset = 0
            while True:
                page = yield Call("GET", "/api/v1/notes", params=query(bank=bank_id, limit=PAGE_SIZE, offset=offset))
                notes.extend(page["results"])
                offset += len(page["results"])
                if not page["results"] or offset >= page["count"]:
                    break
            seen.notes[bank_id] = notes
        return seen.notes[bank_id]

    def _banks(self, seen: _Batch) -> Plan:
        """The person banks (global and private) that hold at least one note: the store's namespaces."""
        if seen.banks is None:
            banks: list[Bank] = []
            offset = 0
            while True:
                page = yield Call("GET", "/api/v1/banks", params={"limit": PAGE_SIZE, "offset": offset})
                banks.extend(page["results"])
                offset += len(page["results"])
                if not page["results"] or offset >= page["count"]:
                    break
            seen.banks = [b for b in banks if b["kind"] in ("global", "private") and b["person"] and b["count"] > 0]
        return seen.banks

    # --- the mapping ----------------------------------------------------------------------------

    def bank_for(self, namespace: tuple[str, ...]) -> _BankRef:
        """The bank a namespace names: (root, person) is user:<person>; (root, person, *scope) is user:<person>:<scope>."""
        if len(namespace) < 2 or namespace[0] != self.root:
            raise InvalidNamespaceError(
                f"A MnemoStore namespace is ({self.root!r}, person) or ({self.root!r}, person, *scope labels); "
                f"got {namespace!r}."
            )
        person, labels = namespace[1], namespace[2:]
        for label in labels:
            if ":" in label:
                raise InvalidNamespaceError(
                    f"Scope labels may not contain ':' ({label!r} in {namespace!r}); give each part as its own label."
                )
        scope = ":".join(labels)
        return _BankRef(f"user:{person}:{scope}" if scope else f"user:{person}", person, scope)

    def _namespace(self, bank: Bank) -> tuple[str, ...]:
        scope = tuple(bank["scope"].split(":")) if bank["scope"] else ()
        return (self.root, str(bank["person"]), *scope)

    def _item(self, namespace: tuple[str, ...], note: Note) -> Item:
        key, value = _key_and_value(note)
        return Item(
            namespace=namespace,
            key=key,
            value=value,
            created_at=_when(note["created_at"]),
            updated_at=_when(note["updated_at"]),
        )


def _key_and_value(note: Note) -> tuple[str, dict[str, Any]]:
    try:
        stored = json.loads(note["content"])
    except ValueError:
        stored = None
    if (
        isinstance(stored, dict)
        and set(stored) == {"key", "value"}
        and isinstance(stored["key"], str)
        and isinstance(stored["value"], dict)
        and note_key(stored["key"]) == note["key"]
    ):
        return stored["key"], stored["value"]
    # A note this store did not write: an item under its note key, with what the note says.
    return note["key"], {
        "content": note["content"],
        "description": note["description"],
        "kind": note["kind"],
        "category": note["category"],
    }


def _description(key: str, value: Mapping[str, Any]) -> str:
    given = value.get("description")
    if isinstance(given, str) and given.strip():
        return given  # over 200 characters it is refused (TooLong), like any description
    named = f'LangGraph item "{key}"'
    return named if len(named) <= DESCRIPTION_MAX else "LangGraph item (its key is in the content)"


def _when(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def _starts_with(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    return namespace[: len(prefix)] == tuple(prefix)


def _condition_holds(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(want == "*" or want == got for want, got in zip(path, part, strict=True))


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b,
    "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b,
    "$lte": lambda a, b: a is not None and a <= b,
}


def _matches(value: Any, wanted: Any) -> bool:
    """A filter on an item's value: equal values, nested dicts field by field, or {"$op": operand}."""
    if isinstance(wanted, Mapping):
        if wanted and all(isinstance(k, str) and k.startswith("$") for k in wanted):
            for operator, operand in wanted.items():
                if operator not in _OPERATORS:
                    raise ValueError(f"Unknown filter operator {operator!r}; use one of {', '.join(_OPERATORS)}.")
                try:
                    if not _OPERATORS[operator](value, operand):
                        return False
                except TypeError:  # comparing values of different types: no match
                    return False
            return True
        if not isinstance(value, Mapping):
            return False
        return all(_matches(value.get(k), v) for k, v in wanted.items())
    equal: bool = value == wanted
    return equal

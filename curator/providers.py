"""LLM providers behind one interface that returns validated, structured plans.

- openai: any OpenAI-compatible chat-completions endpoint (the official SDK), asked for JSON
  matching a schema and validated with pydantic.
- rules: a deterministic extractor for common personal facts in English; no model, no key.
- scripted: plans given in advance, for tests.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from django.conf import settings
from pydantic import BaseModel, ValidationError

from curator.rules import extract_plan, merge_duplicates_plan
from curator.schemas import ConsolidationPlan, CuratorPlan
from memory.framing import (
    BANK_NOTES_LABEL,
    CONSOLIDATION_INPUT_RULE,
    CURATION_INPUT_RULE,
    NEW_MESSAGES_LABEL,
    SUMMARY_LABEL,
    json_line,
)

if TYPE_CHECKING:
    from openai.types.chat import ChatCompletionMessageParam


class ProviderError(Exception):
    """The provider could not produce a valid plan this time (down, slow, throttled or garbage)."""


@dataclass
class Usage:
    provider: str
    model: str
    chars_in: int = 0
    chars_out: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None
    duration_ms: float = 0.0


@dataclass
class ChatLine:
    role: str  # "person" | "agent"
    text: str
    at: datetime
    id: int | None = None  # the message's id, which operations cite as their sources


@dataclass
class KnownNote:
    key: str
    content: str
    kind: str


@dataclass
class CurationRequest:
    messages: list[ChatLine]
    digest: str
    summary: str
    today: str
    # The notes the digest lists, with their content: the rules provider matches what the person
    # retracts against them. A model is given the digest alone (the notes' content could be 40
    # times 2,000 characters); it corrects by key.
    notes: list[KnownNote] = field(default_factory=list)


@dataclass
class ConsolidationRequest:
    bank: str  # the bank's address, e.g. user:ada
    notes: list[dict[str, object]]
    soft_limit: int
    target: int


class LLMProvider(Protocol):
    name: str

    def curate(self, request: CurationRequest) -> tuple[CuratorPlan, Usage]: ...

    def consolidate(self, request: ConsolidationRequest) -> tuple[ConsolidationPlan, Usage]: ...


# --- prompts ----------------------------------------------------------------------------------

CURATE_SYSTEM = f"""You are the curator of an assistant's long-term memory about one person.
You reread recent messages after the conversation has moved on and decide what deserves to outlive it.
{CURATION_INPUT_RULE}
Propose operations as JSON matching the schema:
- remember: a durable fact under a short stable key (reuse an existing key from the memory digest to
  correct it; one fact per key). kind is identity (who they are: name, health constraints), preference,
  fact, or ephemeral (passing states like being on a train; give expires_in_hours).
- forget: a remembered key that is no longer true and has no replacement.
- edit: replace a passage of a remembered note (find, exactly as the note holds it) with content
  (empty removes it), when only part of the note is no longer true.
- append_daily: one line about what happened today worth keeping.
When the person retracts or changes something remembered ("I'm not vegetarian anymore", "I no longer
work at X", "I stopped running"), update the note that says it (remember under the same key with the
new value, or edit) or forget it, with a `reason` naming the message's id and what it took back (not
quoting it); never leave it standing.
Questions, hypotheticals and what others do or said retract nothing.
Each remember, edit and append_daily cites in `sources` the ids of the messages it rests on.
Also write `summary`: the running summary of the conversation so far, at most 1,500 characters.
Propose nothing that is not supported by the person's own words."""

CONSOLIDATE_SYSTEM = f"""You tidy one memory bank that has grown past its limit.
{CONSOLIDATION_INPUT_RULE} Propose merges (fold duplicate or
overlapping notes into one, keeping a key that exists) and forgets (notes that are stale or trivial),
so that the bank ends at or below the target count. Only notes with identical scope_refs and
semantics may be merged. Answer JSON matching the schema."""


def curate_prompt(request: CurationRequest) -> str:
    lines = [json_line({"id": m.id, "who": m.role, "when": m.at.isoformat(), "text": m.text}) for m in request.messages]
    return (
        f"Today is {request.today}.\n\n"
        f"What is already remembered (the digest):\n{request.digest}\n\n"
        f"{SUMMARY_LABEL}\n{json_line({'summary': request.summary})}\n\n"
        f"{NEW_MESSAGES_LABEL}\n" + "\n".join(lines)
    )


def consolidate_prompt(request: ConsolidationRequest) -> str:
    notes = "\n".join(json_line(n) for n in request.notes)
    return (
        f"Bank {request.bank} holds {len(request.notes)} notes; its soft limit is {request.soft_limit}. "
        f"Bring it to {request.target} notes or fewer.\n{BANK_NOTES_LABEL}\n{notes}"
    )


# --- providers --------------------------------------------------------------------------------

Plan = TypeVar("Plan", bound=BaseModel)


class OpenAIProvider:
    name = "openai"

    def __init__(
        self, *, base_url: str | None, api_key: str | None, model: str, timeout: float, max_retries: int
    ) -> None:
        from openai import OpenAI

        self.model = model
        self._client = OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout, max_retries=max_retries
        )

    def _ask(self, system: str, user: str, schema: type[Plan]) -> tuple[Plan, Usage]:
        import openai

        started = time.perf_counter()
        try:
            response = self._client.chat.completions.create(
                model=self.model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema()},
                },
                temperature=0,
            )
        except openai.APITimeoutError as exc:
            raise ProviderError("the LLM endpoint timed out") from exc
        except openai.RateLimitError as exc:
            raise ProviderError("the LLM endpoint is rate limiting (429) after retries") from exc
        except openai.APIStatusError as exc:
            raise ProviderError(f"the LLM endpoint failed with {exc.status_code}") from exc
        except openai.APIConnectionError as exc:
            raise ProviderError("the LLM endpoint is unreachable") from exc
        text = (response.choices[0].message.content or "") if response.choices else ""
        usage = Usage(
            provider=self.name,
            model=self.model,
            chars_in=len(system) + len(user),
            chars_out=len(text),
            tokens_in=getattr(response.usage, "prompt_tokens", None),
            tokens_out=getattr(response.usage, "completion_tokens", None),
            duration_ms=(time.perf_counter() - started) * 1000,
        )
        try:
            return schema.model_validate_json(text), usage
        except ValidationError as exc:
            raise ProviderError(
                f"the LLM answered something that is not a valid {schema.__name__}: {exc.errors()[0]['msg']}"
            ) from exc

    def curate(self, request: CurationRequest) -> tuple[CuratorPlan, Usage]:
        return self._ask(CURATE_SYSTEM, curate_prompt(request), CuratorPlan)

    def reply(self, system: str, messages: list[dict[str, str]]) -> str:
        """A plain chat reply (the demo's second model call), given exactly what the composer chose."""
        import openai

        # The composer's window: user and assistant turns, as role and content.
        window = cast("list[ChatCompletionMessageParam]", messages)
        try:
            response = self._client.chat.completions.create(
                model=self.model, messages=[{"role": "system", "content": system}, *window]
            )
        except openai.OpenAIError as exc:
            raise ProviderError(f"the LLM endpoint failed to reply ({exc.__class__.__name__})") from exc
        return (response.choices[0].message.content or "").strip() if response.choices else ""

    def consolidate(self, request: ConsolidationRequest) -> tuple[ConsolidationPlan, Usage]:
        return self._ask(CONSOLIDATE_SYSTEM, consolidate_prompt(request), ConsolidationPlan)


class RulesProvider:
    """Deterministic, offline: common personal facts in English, and exact-duplicate merges."""

    name = "rules"
    model = "rules-v1"

    def curate(self, request: CurationRequest) -> tuple[CuratorPlan, Usage]:
        started = time.perf_counter()
        plan = extract_plan(request)
        prompt = curate_prompt(request)
        return plan, Usage(
            self.name,
            self.model,
            len(prompt),
            len(plan.model_dump_json()),
            None,
            None,
            (time.perf_counter() - started) * 1000,
        )

    def consolidate(self, request: ConsolidationRequest) -> tuple[ConsolidationPlan, Usage]:
        started = time.perf_counter()
        plan = merge_duplicates_plan(request)
        return plan, Usage(
            self.name,
            self.model,
            len(consolidate_prompt(request)),
            len(plan.model_dump_json()),
            None,
            None,
            (time.perf_counter() - started) * 1000,
        )


@dataclass
class ScriptedProvider:
    """Returns prepared plans (or raises prepared errors) in order; records what it was asked."""

    curations: list[CuratorPlan | Exception] = field(default_factory=list)
    consolidations: list[ConsolidationPlan | Exception] = field(default_factory=list)
    seen: list[object] = field(default_factory=list)
    name: str = "scripted"
    model: str = "scripted"

    def _next[T](self, queue: list[T | Exception], request: object) -> T | None:
        self.seen.append(request)
        item = queue.pop(0) if queue else None
        if isinstance(item, Exception):
            raise item
        return item

    def curate(self, request: CurationRequest) -> tuple[CuratorPlan, Usage]:
        plan = self._next(self.curations, request) or CuratorPlan()
        return plan, Usage(self.name, self.model, len(curate_prompt(request)), 0)

    def consolidate(self, request: ConsolidationRequest) -> tuple[ConsolidationPlan, Usage]:
        plan = self._next(self.consolidations, request) or ConsolidationPlan()
        return plan, Usage(self.name, self.model, len(consolidate_prompt(request)), 0)


_override: Callable[[], LLMProvider] | None = None


def get_provider() -> LLMProvider:
    if _override is not None:
        return _override()
    if settings.LLM_PROVIDER == "openai":
        return OpenAIProvider(
            base_url=settings.LLM_BASE_URL,
            api_key=settings.LLM_API_KEY,
            model=settings.LLM_MODEL,
            timeout=settings.LLM_TIMEOUT,
            max_retries=settings.LLM_MAX_RETRIES,
        )
    return RulesProvider()

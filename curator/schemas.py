"""What an LLM (or the rules provider) may propose: validated before anything is applied."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from config.text import find_unstorable

NoteKind = Literal["identity", "preference", "fact", "ephemeral"]


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _SourcedOp(_Op):
    sources: list[int] = Field(
        default_factory=list, description="The ids of the messages this operation rests on (their `id`)."
    )


class RememberOp(_SourcedOp):
    op: Literal["remember"]
    key: str = Field(description="A short stable slug, e.g. home-city, employer, allergy-peanuts.")
    description: str = Field(description="One line saying what the note is.")
    content: str = Field(description="The fact itself, plain text.")
    kind: NoteKind = "fact"
    bank: Literal["private", "shared", "global"] = "global"
    category: str | None = None
    expires_in_hours: float | None = Field(default=None, gt=0, le=24 * 365)
    reason: str = Field(
        default="",
        description="When this replaces what the key held: why, naming the message (its id), not quoting it.",
    )


class AppendDailyOp(_SourcedOp):
    op: Literal["append_daily"]
    text: str = Field(description="What happened today worth keeping, one line.")


class EditOp(_SourcedOp):
    op: Literal["edit"]
    key: str = Field(description="The remembered note to edit.")
    find: str = Field(description="The passage of the note's content to replace, exactly as the note holds it.")
    content: str = Field(description="What replaces it; empty removes the passage.")
    reason: str = Field(default="", description="Why, naming the message (its id), not quoting it.")


class ForgetOp(_Op):
    op: Literal["forget"]
    key: str
    reason: str = ""


Operation = Annotated[RememberOp | AppendDailyOp | EditOp | ForgetOp, Field(discriminator="op")]


class _Plan(BaseModel):
    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        # An answer holding text Postgres cannot store (a NUL, a lone surrogate) or other control
        # characters is malformed as a whole (config.text): refused before anything is applied,
        # rather than failing midway in a summary, a reason or a log line.
        if (problem := find_unstorable(data)) is not None:
            raise ValueError(f"{problem.field} {problem.message}")
        return data


class CuratorPlan(_Plan):
    operations: list[Operation] = Field(default_factory=list)
    summary: str | None = Field(default=None, description="The updated running summary of the conversation.")


class Merge(BaseModel):
    model_config = ConfigDict(extra="forbid")
    keep: str = Field(description="The key that survives.")
    absorb: list[str] = Field(min_length=1, description="Keys folded into it and removed.")
    content: str = Field(description="The merged content.")
    description: str | None = None


class Drop(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    reason: str


class ConsolidationPlan(_Plan):
    merges: list[Merge] = Field(default_factory=list)
    forgets: list[Drop] = Field(default_factory=list)

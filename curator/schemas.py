"""What an LLM (or the rules provider) may propose: validated before anything is applied."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RememberOp(_Op):
    op: Literal["remember"]
    key: str = Field(description="A short stable slug, e.g. home-city, employer, allergy-peanuts.")
    description: str = Field(description="One line saying what the note is.")
    content: str = Field(description="The fact itself, plain text.")
    kind: Literal["identity", "preference", "fact", "ephemeral"] = "fact"
    bank: Literal["private", "shared", "global"] = "global"
    category: str | None = None
    expires_in_hours: float | None = Field(default=None, gt=0, le=24 * 365)


class AppendDailyOp(_Op):
    op: Literal["append_daily"]
    text: str = Field(description="What happened today worth keeping, one line.")


class ForgetOp(_Op):
    op: Literal["forget"]
    key: str
    reason: str = ""


Operation = Annotated[RememberOp | AppendDailyOp | ForgetOp, Field(discriminator="op")]


class CuratorPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
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


class ConsolidationPlan(BaseModel):
    model_config = ConfigDict(extra="forbid")
    merges: list[Merge] = Field(default_factory=list)
    forgets: list[Drop] = Field(default_factory=list)

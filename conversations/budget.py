"""The composer's character arithmetic as pure functions: what fits, what is cut, what is left out.

No database and no Django: conversations.composer decides which layer asks for what and renders
the text; these functions decide, from lengths alone, how much of it one ceiling allows. The tests
in tests/conversations/test_budget.py run them alone (mutation testing runs them in seconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ELLIPSIS = "…"
DIGEST_CUT_LINE = "({left} digest lines did not fit this turn.)"


def cut(text: str, limit: int) -> str:
    """`text` itself when it fits in `limit` characters, else its start and an ellipsis, `limit` long."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS


def allowance(room: int, cap: int) -> int:
    """What a layer may spend: its own cap, or what the ceiling has left if that is less."""
    return min(room, cap)


def ceiling_binds(room: int, cap: int) -> bool:
    """Whether a layer that could not take what it asked for was held back by the ceiling (and not
    only by its own cap): from then on every layer to its right gets nothing."""
    return room < cap


def trim_oldest_first(lengths: Sequence[int], over: int) -> list[int | None]:
    """How many characters each part keeps when `over` characters must go, taken from the oldest
    part first; the last part (the current message) keeps at least one. None for a part left whole."""
    keeps: list[int | None] = []
    last = len(lengths) - 1
    for index, length in enumerate(lengths):
        if over <= 0:
            keeps.append(None)
            continue
        keep = max(0, length - over)
        if index == last:
            keep = max(keep, 1)
        over = max(0, over - length)  # what is still over once this part gave what it could
        keeps.append(keep)
    return keeps


def fit_lines(lines: Sequence[str], allowed: int) -> tuple[str, bool]:
    """The lines joined by newlines while they fit in `allowed`; when one does not, the text so far,
    a line saying how many did not fit, cut to `allowed`. Returns the text and whether it was cut."""
    text = ""
    for index, line in enumerate(lines):
        candidate = f"{text}\n{line}" if text else line
        if len(candidate) > allowed:
            notice = DIGEST_CUT_LINE.format(left=len(lines) - index)
            return cut(f"{text}\n{notice}", allowed), True
        text = candidate
    return text, False


@dataclass(frozen=True)
class Packing:
    taken: list[int]  # indices of the lines that fit, in order
    length: int  # the length of the text with them appended

    def omitted(self, offered: int) -> int:
        return offered - len(self.taken)


def pack_lines(start: int, lengths: Sequence[int], allowed: int) -> Packing:
    """Append lines, each after a newline, to a text `start` long, in order, skipping any that
    would take the text past `allowed` (a later, shorter line may still fit)."""
    taken: list[int] = []
    length = start
    for index, size in enumerate(lengths):
        if length + 1 + size <= allowed:
            length += 1 + size
            taken.append(index)
    return Packing(taken, length)


@dataclass(frozen=True)
class PassagePlan:
    count: int  # how many passages ride along, from the first
    first_cut_to: int | None  # when the first passage alone is too long: the length it is cut to
    overflowed: bool  # a passage did not fit in what the layer may spend


def plan_passages(start: int, lengths: Sequence[int], allowed: int, most: int) -> PassagePlan:
    """Passages in rank order, each after a newline, after a header `start` long: at most `most`,
    stopping at the first that does not fit, except that a first passage too long on its own is
    cut rather than none shown."""
    length = start
    count = 0
    for size in lengths:
        if count == most:
            break
        if length + 1 + size > allowed:
            if count:
                return PassagePlan(count, None, True)
            # Cut to exactly what is left, so nothing after it can fit.
            return PassagePlan(1, allowed - length - 1, True)
        length += 1 + size
        count += 1
    return PassagePlan(count, None, False)


def newest_that_fit(sizes: Sequence[int], room: int) -> int:
    """How many units, counted from the newest (the end), fit in `room` together, each unit `size`
    long and joined to the next by a newline. Units are taken whole and contiguous."""
    count = 0
    length = -1  # so the first (newest) unit adds no newline
    for size in reversed(sizes):
        candidate = length + 1 + size
        if candidate > room:
            break
        length = candidate
        count += 1
    return count

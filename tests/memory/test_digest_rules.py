"""The digest's rules as pure functions: no database, no Django (memory/digest.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from memory.digest import (
    DIGEST_EMPTY,
    DIGEST_MORE,
    FULL_NOTICE,
    LINE_OVERHEAD,
    digest_line,
    digest_max_chars,
    digest_sort_key,
    render_digest,
    split_listed,
)
from memory.framing import DIGEST_HEADER

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@dataclass
class Row:
    key: str
    description: str = "a note"
    scope_refs: dict[str, list[str]] = field(default_factory=dict)
    semantics: list[str] = field(default_factory=list)
    updated_at: datetime = NOW


def ordered_keys(rows: list[Row]) -> list[str]:
    return [row.key for row in sorted(rows, key=digest_sort_key)]


def test_a_digest_line_is_one_json_object_of_key_and_description():
    line = digest_line(Row("home", 'Lives in "Bergen"\\ now'))

    assert json.loads(line) == {"key": "home", "description": 'Lives in "Bergen"\\ now'}
    assert line == '{"key": "home", "description": "Lives in \\"Bergen\\"\\\\ now"}'
    assert "\n" not in line


def test_more_ref_types_sort_first():
    rows = [Row("none"), Row("two", scope_refs={"project": ["p"], "item": ["a"]}), Row("one", scope_refs={"p": ["x"]})]

    assert ordered_keys(rows) == ["two", "one", "none"]


def test_among_equally_specific_notes_fewer_refs_sort_first():
    rows = [Row("three", scope_refs={"p": ["a", "b", "c"]}), Row("one", scope_refs={"p": ["a"]})]

    assert ordered_keys(rows) == ["one", "three"]


def test_precision_counts_refs_across_every_type():
    wide = Row("wide", scope_refs={"p": ["a", "b"], "q": ["c", "d"]})
    narrow = Row("narrow", scope_refs={"p": ["a"], "q": ["c", "d"]})

    assert ordered_keys([wide, narrow]) == ["narrow", "wide"]
    assert digest_sort_key(wide)[:2] == (-2, 4)


def test_then_more_tags_sort_first_then_the_newest():
    rows = [
        Row("old-tagged", semantics=["a"], updated_at=NOW - timedelta(days=2)),
        Row("richer", semantics=["a", "b"], updated_at=NOW - timedelta(days=9)),
        Row("new-tagged", semantics=["b"], updated_at=NOW),
        Row("untagged", updated_at=NOW + timedelta(days=1)),
    ]

    assert ordered_keys(rows) == ["richer", "new-tagged", "old-tagged", "untagged"]


def test_the_sort_key_is_exactly_the_four_criteria():
    row = Row("k", scope_refs={"p": ["a", "b"]}, semantics=["x", "y", "z"], updated_at=NOW)

    assert digest_sort_key(row) == (-1, 2, -3, -NOW.timestamp())


def test_the_first_limit_notes_are_listed_and_the_rest_counted():
    assert split_listed(["a", "b", "c", "d"], 3) == (["a", "b", "c"], 1)
    assert split_listed(["a", "b"], 3) == (["a", "b"], 0)
    assert split_listed(["a", "b", "c"], 3) == (["a", "b", "c"], 0)
    assert split_listed([], 3) == ([], 0)


def test_the_rendered_digest_lists_each_note_under_the_header():
    text = render_digest([Row("home", "Lives in Bergen"), Row("tea", "Likes tea")], omitted=0, full_kinds=[])

    assert text.split("\n")[: DIGEST_HEADER.count("\n") + 1] == DIGEST_HEADER.split("\n")
    assert text.endswith(
        '\n{"key": "home", "description": "Lives in Bergen"}\n{"key": "tea", "description": "Likes tea"}'
    )
    assert DIGEST_EMPTY not in text


def test_an_empty_digest_says_nothing_is_remembered():
    assert render_digest([], omitted=0, full_kinds=[]) == f"{DIGEST_HEADER}\n{DIGEST_EMPTY}"
    assert render_digest(iter([]), omitted=0, full_kinds=[]) == f"{DIGEST_HEADER}\n{DIGEST_EMPTY}"


def test_the_digest_says_how_many_notes_it_does_not_list_then_each_full_bank():
    text = render_digest([Row("home")], omitted=7, full_kinds=["private", "global"])

    lines = text.split("\n")
    assert lines[-3:] == [
        DIGEST_MORE.format(count=7),
        FULL_NOTICE.format(kind="private"),
        FULL_NOTICE.format(kind="global"),
    ]
    assert lines[-4] == digest_line(Row("home"))


def test_no_count_line_when_every_note_is_listed():
    assert "more notes" not in render_digest([Row("home")], omitted=0, full_kinds=[])


def test_the_worst_case_size_is_the_sum_of_its_parts():
    line = LINE_OVERHEAD + 64 + 2 * 200 + 1
    more = len(DIGEST_MORE.format(count=10**9)) + 1
    notices = 3 * (len(FULL_NOTICE.format(kind="private")) + 1)

    assert digest_max_chars(40, key_max=64, description_max=200) == len(DIGEST_HEADER) + 1 + 40 * line + more + notices
    assert digest_max_chars(41, key_max=64, description_max=200) - digest_max_chars(40, key_max=64, description_max=200) == line  # fmt: skip
    assert len('{"key": "", "description": ""}') == LINE_OVERHEAD


def test_the_worst_case_bounds_the_largest_digest_that_can_be_rendered():
    # Descriptions of quotes double under JSON; full banks; a ten-digit count.
    notes = [Row("k" * 64, '"' * 200) for _ in range(40)]
    bound = digest_max_chars(40, key_max=64, description_max=200)

    realistic = render_digest(notes, omitted=10**9, full_kinds=["private", "shared", "global"])
    widest = render_digest(notes, omitted=10**9, full_kinds=["private"] * 3)

    assert len(realistic) <= bound
    assert len(widest) == bound - 1  # the bound counts a newline after the last line too

"""The LongMemEval benchmark's scoring and import rules (bench/longmemeval.py), without a database."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime
from typing import Any

import pytest

from bench.longmemeval import (
    Question,
    bodies,
    dataset_path,
    import_lines,
    parse_date,
    session_recall,
    shown,
    split_halves,
    turn_hit,
    turn_recall,
    unescaped,
)

EVIDENCE = {("answer_a", 1), ("answer_b", 0)}


def test_turn_recall_is_the_share_of_evidence_turns_in_the_top_k() -> None:
    ranked = [("s1", 0), ("answer_a", 1), ("s2", 3), ("answer_b", 0)]
    assert turn_recall(ranked, EVIDENCE, 10) == 1.0
    assert turn_recall(ranked, EVIDENCE, 2) == 0.5
    assert turn_recall(ranked, EVIDENCE, 1) == 0.0


def test_turn_recall_counts_a_turn_found_twice_once() -> None:
    # A session a haystack holds twice is imported twice: both copies name the same turn.
    assert turn_recall([("answer_a", 1), ("answer_a", 1)], EVIDENCE, 10) == 0.5


def test_turn_hit_needs_one_evidence_turn_in_the_top_k() -> None:
    ranked = [("s1", 0), ("s1", 1), ("answer_b", 0)]
    assert turn_hit(ranked, EVIDENCE, 3) == 1.0
    assert turn_hit(ranked, EVIDENCE, 2) == 0.0


def test_a_question_without_evidence_turns_is_left_out_of_turn_scores() -> None:
    assert turn_recall([("s1", 0)], set(), 10) is None
    assert turn_hit([("s1", 0)], set(), 10) is None


def test_session_recall_counts_each_evidence_session_with_a_turn_in_the_top_k() -> None:
    ranked = [("answer_a", 4), ("answer_a", 5), ("s1", 0), ("s2", 0), ("s3", 0), ("answer_b", 9)]
    sessions = {"answer_a", "answer_b", "answer_c"}
    assert session_recall(ranked, sessions, 5) == pytest.approx(1 / 3)
    assert session_recall(ranked, sessions, 10) == pytest.approx(2 / 3)


def test_a_short_turn_is_shown_only_whole() -> None:
    turn = "I adopted a greyhound called Biscuit last spring."
    assert shown(turn, f"before {turn} after")
    assert not shown(turn, f"before {turn[:-1]}")


def test_a_long_turn_is_shown_by_any_contiguous_slice_of_100_characters() -> None:
    turn = "".join(f"{i:03d}," for i in range(100))  # 400 characters, no slice repeated
    assert shown(turn, "cut: " + turn[150:250] + "…")
    assert not shown(turn, turn[150:249] + "…")  # 99 characters are not enough
    assert shown(turn[:100], turn[:100])  # exactly 100: the whole turn


def test_a_turn_is_found_in_a_json_line_once_its_escapes_are_read_back() -> None:
    turn = 'She said "yes"\nand then: C:\\path\tdone. ' * 5
    line = json.dumps({"when": "2023-05-28", "who": "person", "text": turn}, ensure_ascii=False)
    assert not shown(turn, line)
    assert shown(turn, unescaped(line))
    assert shown(turn, unescaped(line[:200] + "…"))  # a first passage cut mid-line


def test_the_halves_are_stratified_by_type_and_fixed_by_the_ids() -> None:
    questions = [(f"q{i}", "multi-session") for i in range(15)] + [(f"u{i}", "single-session-user") for i in range(4)]
    halves = split_halves(questions)
    shuffled = questions[:]
    random.Random(3).shuffle(shuffled)
    assert split_halves(shuffled) == halves
    tune = [question for question, half in halves.items() if half == "tune"]
    assert sum(question.startswith("q") for question in tune) == 7  # at most half: 15 // 2
    assert sum(question.startswith("u") for question in tune) == 2


def test_session_dates_are_read_as_utc() -> None:
    assert parse_date("2023/05/28 (Sun) 19:47") == datetime(2023, 5, 28, 19, 47, tzinfo=UTC)


def test_import_lines_keep_the_turns_places_and_import_a_repeated_session_twice() -> None:
    date = datetime(2023, 5, 28, 19, 47, tzinfo=UTC)
    turns: list[dict[str, Any]] = [
        {"role": "user", "content": "Where did I park?"},
        {"role": "assistant", "content": "  "},
        {"role": "user", "content": "Level 3.", "has_answer": True},
    ]
    question = Question("q", "single-session-user", "Where?", date, [("s", date, turns), ("s", date, turns)], {"s"})
    lines, names, refused = import_lines(question)
    assert [line["external_id"] for line in lines] == ["s", "s#2"]
    assert names == [[("s", 0), ("s", 2)], [("s", 0), ("s", 2)]]
    assert [message["created_at"] for message in lines[0]["messages"]] == [
        "2023-05-28T19:47:00+00:00",
        "2023-05-28T19:47:02+00:00",
    ]
    assert [(r.name, r.reason, r.evidence) for r in refused] == [(("s", 1), "empty", False)] * 2


def test_bodies_stay_under_the_limit_and_keep_every_line_in_order() -> None:
    lines = [{"text": "x" * 100} for _ in range(10)]
    groups = bodies(lines, 350)
    assert [i for group in groups for i in group] == list(range(10))
    assert all(len(json.dumps([lines[i] for i in group])) <= 350 for group in groups)
    assert len(groups) == 4


def test_the_sample_is_found_where_mnemo_longmemeval_points(tmp_path, monkeypatch) -> None:
    sample = tmp_path / "dev-60.jsonl.gz"
    sample.write_bytes(b"")
    monkeypatch.setenv("MNEMO_LONGMEMEVAL", str(tmp_path))
    assert dataset_path() == sample
    monkeypatch.setenv("MNEMO_LONGMEMEVAL", str(sample))
    assert dataset_path() == sample

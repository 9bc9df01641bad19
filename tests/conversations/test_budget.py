"""The composer's character arithmetic as pure functions: no database, no Django (conversations/budget.py)."""

from __future__ import annotations

import pytest

from conversations.budget import (
    DIGEST_CUT_LINE,
    ELLIPSIS,
    Packing,
    PassagePlan,
    allowance,
    ceiling_binds,
    cut,
    fit_lines,
    newest_that_fit,
    pack_lines,
    plan_passages,
    trim_oldest_first,
)


def test_a_text_that_fits_is_not_cut():
    assert cut("abcde", 5) == "abcde"
    assert cut("abcde", 9) == "abcde"
    assert cut("", 0) == ""


def test_a_cut_text_ends_in_an_ellipsis_and_is_exactly_the_limit_long():
    assert cut("abcdef", 5) == "abcd" + ELLIPSIS
    assert len(cut("x" * 100, 17)) == 17
    assert cut("abcdef", 1) == ELLIPSIS


def test_a_limit_of_zero_still_leaves_the_ellipsis():
    assert cut("abc", 0) == ELLIPSIS


def test_a_layer_spends_its_cap_or_what_the_ceiling_left():
    assert allowance(5000, 2000) == 2000
    assert allowance(1500, 2000) == 1500
    assert allowance(2000, 2000) == 2000
    assert allowance(-3, 2000) == -3


def test_the_ceiling_binds_only_when_it_left_less_than_the_cap():
    assert ceiling_binds(1999, 2000)
    assert not ceiling_binds(2000, 2000)
    assert not ceiling_binds(2001, 2000)


def test_nothing_is_trimmed_when_nothing_is_over():
    assert trim_oldest_first([10, 20, 30], 0) == [None, None, None]
    assert trim_oldest_first([10, 20, 30], -5) == [None, None, None]


def test_trimming_takes_from_the_oldest_part_first():
    assert trim_oldest_first([10, 20, 30], 4) == [6, None, None]
    assert trim_oldest_first([10, 20, 30], 1) == [9, None, None]  # a single character over is still over
    assert trim_oldest_first([10, 20, 30], 10) == [0, None, None]
    assert trim_oldest_first([10, 20, 30], 15) == [0, 15, None]
    assert trim_oldest_first([10, 20, 30], 30) == [0, 0, None]


def test_the_current_message_keeps_at_least_one_character():
    assert trim_oldest_first([10, 20, 30], 100) == [0, 0, 1]
    assert trim_oldest_first([30], 29) == [1]
    assert trim_oldest_first([30], 28) == [2]
    assert trim_oldest_first([1], 5) == [1]


def test_lines_that_fit_are_joined_whole():
    assert fit_lines(["ab", "cd", "ef"], 8) == ("ab\ncd\nef", False)
    assert fit_lines([], 0) == ("", False)


def test_the_first_line_that_does_not_fit_ends_the_text_with_a_count_of_what_was_left_out():
    lines = ["ab", "cd", "ef", "gh"]
    text, was_cut = fit_lines(lines, 7)

    notice = DIGEST_CUT_LINE.format(left=2)
    assert was_cut
    assert text == cut("ab\ncd\n" + notice, 7)
    assert len(text) == 7


def test_the_notice_itself_is_cut_to_what_the_layer_may_spend():
    text, was_cut = fit_lines(["a" * 10, "b"], 500)
    assert (text, was_cut) == ("a" * 10 + "\nb", False)

    text, was_cut = fit_lines(["a" * 10, "b" * 10], 15)
    assert was_cut
    assert text == "a" * 10 + "\n(1 " + ELLIPSIS
    assert DIGEST_CUT_LINE.format(left=1) == "(1 digest lines did not fit this turn.)"


def test_a_first_line_too_long_cuts_to_the_notice_alone():
    text, was_cut = fit_lines(["a" * 50], 30)
    assert was_cut
    assert text == cut("\n" + DIGEST_CUT_LINE.format(left=1), 30)


def test_packing_appends_each_line_after_a_newline_while_it_fits():
    assert pack_lines(10, [5, 5], 22) == Packing([0, 1], 22)
    assert pack_lines(10, [5, 5], 21) == Packing([0], 16)


def test_packing_skips_a_line_too_long_and_still_takes_a_shorter_one_after_it():
    packing = pack_lines(0, [3, 50, 4, 1], 10)

    assert packing == Packing([0, 2], 9)
    assert packing.omitted(4) == 2


def test_packing_nothing_takes_nothing():
    assert pack_lines(5, [], 100) == Packing([], 5)
    assert pack_lines(100, [1], 100).omitted(1) == 1


def test_passages_are_taken_in_rank_order_up_to_the_most_allowed():
    assert plan_passages(10, [5, 5, 5], 100, 2) == PassagePlan(2, None, False)
    assert plan_passages(10, [5, 5, 5], 100, 3) == PassagePlan(3, None, False)
    assert plan_passages(10, [], 100, 3) == PassagePlan(0, None, False)


def test_passages_stop_at_the_first_that_does_not_fit():
    # 10 + 6 + 6 = 22; the third would make 28.
    assert plan_passages(10, [5, 5, 5, 1], 27, 4) == PassagePlan(2, None, True)
    assert plan_passages(10, [5, 5, 5], 28, 4) == PassagePlan(3, None, False)


def test_a_first_passage_too_long_alone_is_cut_to_what_is_left():
    assert plan_passages(10, [50, 1], 30, 4) == PassagePlan(1, 19, True)
    assert plan_passages(10, [50], 30, 1) == PassagePlan(1, 19, True)
    assert plan_passages(10, [19], 30, 4) == PassagePlan(1, None, False)
    assert plan_passages(10, [20], 30, 4) == PassagePlan(1, 19, True)


def test_the_newest_units_that_fit_are_counted_from_the_end():
    assert newest_that_fit([5, 5, 5], 100) == 3
    assert newest_that_fit([5, 5, 5], 11) == 2
    assert newest_that_fit([5, 5, 5], 10) == 1
    assert newest_that_fit([5, 5, 5], 5) == 1
    assert newest_that_fit([5, 5, 5], 4) == 0
    assert newest_that_fit([], 10) == 0


def test_units_are_taken_contiguously_so_an_old_small_one_after_a_big_one_is_not():
    assert newest_that_fit([1, 50, 5], 20) == 1
    assert newest_that_fit([1, 5, 5], 12) == 2
    assert newest_that_fit([1, 5, 5], 13) == 3


@pytest.mark.parametrize("room", [0, 1, 9, 10, 11, 16, 17])
def test_the_units_taken_always_fit_in_the_room(room):
    sizes = [3, 7, 2, 5]
    count = newest_that_fit(sizes, room)
    taken = sizes[len(sizes) - count :]
    assert sum(taken) + max(0, count - 1) <= room
    if count < len(sizes):
        assert sum(sizes[len(sizes) - count - 1 :]) + count > room


def test_newest_that_fit_counts_the_newlines_between_units_but_none_before_the_first() -> None:
    assert newest_that_fit([5], 5) == 1
    assert newest_that_fit([5], 4) == 0
    assert newest_that_fit([5, 5], 11) == 2  # 5 + a newline + 5
    assert newest_that_fit([5, 5], 10) == 1
    assert newest_that_fit([], 10) == 0

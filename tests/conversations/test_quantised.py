"""A large pair's vectors kept small (conversations.quantised): the two-step search finds what the
exact scan finds, and its similarities are the exact ones to within the 8-bit components' error."""

from __future__ import annotations

import numpy as np
import pytest

from conversations import quantised


def clustered(count: int, width: int = 384, seed: int = 7) -> np.ndarray:
    """Unit vectors around a few topics and off a shared direction, as sentence embeddings lie."""
    rng = np.random.default_rng(seed)
    shared = rng.normal(size=width)
    topics = rng.normal(size=(40, width))
    rows = shared * 0.8 + topics[rng.integers(len(topics), size=count)] + rng.normal(size=(count, width))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def kept(units: np.ndarray):
    codes, scales = quantised.components(units)
    return list(quantised.signs(units)), codes, scales


def test_the_closest_by_signs_then_components_are_the_closest_exactly():
    units = clustered(20_000)
    words, codes, scales = kept(units)
    present = np.ones(len(units), dtype=bool)
    rng = np.random.default_rng(1)
    shared = []
    for _ in range(40):
        query = units[rng.integers(len(units))] + rng.normal(scale=0.03, size=units.shape[1])
        query = (query / np.linalg.norm(query)).astype(np.float32)
        rows, similarity = quantised.closest(words, codes, scales, present, query, rescored=1_000)
        exact = units @ query
        assert np.abs(similarity - exact[rows]).max() < 0.005  # each rescored row's similarity
        best = set(np.argsort(-exact)[:10].tolist())
        found = set(rows[np.argsort(-similarity)[:10]].tolist())
        shared.append(len(best & found) / 10)
    assert np.mean(shared) >= 0.9, np.mean(shared)


def test_rows_without_a_vector_are_never_candidates():
    units = clustered(3_000)
    words, codes, scales = kept(units)
    present = np.ones(len(units), dtype=bool)
    present[::2] = False
    query = units[10]  # itself without a vector: never found
    rows, _ = quantised.closest(words, codes, scales, present, query, rescored=500)
    assert len(rows) == 500
    assert bool(present[rows].all())
    assert 10 not in rows.tolist()


def test_fewer_rows_than_are_rescored_are_all_scored():
    units = clustered(50)
    words, codes, scales = kept(units)
    present = np.ones(len(units), dtype=bool)
    present[3] = False
    rows, similarity = quantised.closest(words, codes, scales, present, units[7], rescored=1_000)
    assert sorted(rows.tolist()) == [row for row in range(50) if row != 3]
    assert similarity[rows.tolist().index(7)] == pytest.approx(1.0, abs=0.005)


@pytest.mark.parametrize("width", [384, 100, 64, 1])
def test_components_and_signs_keep_each_vector(width):
    units = clustered(30, width=width) if width > 1 else np.array([[1.0], [-1.0], [0.0]], dtype=np.float32)
    codes, scales = quantised.components(units)
    assert codes.dtype == np.int8
    assert np.abs(codes.astype(np.float32) * scales[:, None] - units).max() <= scales.max() / 2 + 1e-7
    words = quantised.signs(units)
    assert words.shape == (quantised.sign_words(width), len(units))
    bits = np.unpackbits(words.T.copy().view(np.uint8), axis=1, bitorder="little")[:, :width]
    assert (bits.astype(bool) == (units > 0)).all()
    assert 8 * quantised.sign_words(width) + width + 4 == quantised.bytes_per_vector(width)


def test_a_zero_row_keeps_zero_and_scores_zero():
    units = np.zeros((2, 8), dtype=np.float32)
    units[0, 0] = 1.0
    codes, scales = quantised.components(units)
    assert scales[1] == 0
    assert not codes[1].any()
    rows, similarity = quantised.closest(list(quantised.signs(units)), codes, scales, np.ones(2, bool), units[0])
    assert dict(zip(rows.tolist(), similarity.tolist(), strict=True)) == {0: pytest.approx(1.0), 1: 0.0}


def test_the_rows_whose_signs_differ_least_are_taken_and_ties_at_the_edge_go_to_the_latest():
    rng = np.random.default_rng(3)
    differ = rng.integers(0, 40, size=5_000).astype(np.uint16)
    present = rng.random(5_000) > 0.1
    rows = quantised.fewest(differ.copy(), present, 700, 384)
    assert len(rows) == 700
    assert len(set(rows.tolist())) == 700
    assert (np.diff(rows) > 0).all()  # in row order
    assert bool(present[rows].all())
    edge = int(differ[rows].max())
    left = np.setdiff1d(np.flatnonzero(present), rows)
    assert int(differ[left].min()) >= edge  # nothing left out differs less than a row taken
    assert set(np.flatnonzero(present & (differ < edge)).tolist()) <= set(rows.tolist())
    tied_taken = rows[differ[rows] == edge]
    tied_left = left[differ[left] == edge]
    assert tied_left.size  # the edge's rows were not all taken
    assert tied_taken.min() > tied_left.max()  # the latest of them were


def test_absent_rows_are_never_taken_even_when_their_signs_agree_best():
    differ = np.array([0, 0, 0, 5, 6, 7, 8], dtype=np.uint16)
    present = np.array([False, False, False, True, True, True, True])
    assert quantised.fewest(differ, present, 2, 64).tolist() == [3, 4]

"""A large pair's vectors kept small, and searched in two steps (conversations.kept_pairs).

Kept as they are (float32), the vectors of a pair of 100,000 messages take 150 MB at 384
dimensions, and one scan of them takes some 20 ms; the HNSW index answers in about as long, and
finds only about 70% of what the exact scan finds. Above SEARCH_EXACT_UP_TO messages a kept pair
holds each vector twice, small:

- its signs, one bit a dimension (48 bytes at 384): the number of signs two vectors differ in
  grows with the angle between them, and counting them over a whole pair takes a few milliseconds;
- its components in 8 bits, scaled by the vector's largest one (388 bytes), from which the
  similarity of the RESCORED closest by signs is computed again, to about 0.002 of the exact one.

So 436 bytes a vector, against 1,536: SEARCH_KEPT_VECTORS' room holds 3.5 times as many.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

RESCORED = 4_000  # candidates by signs whose similarity is computed from their 8-bit components
LEVELS = 127  # an 8-bit component's largest magnitude


def sign_words(width: int) -> int:
    """How many 64-bit words hold a vector's signs."""
    return (width + 63) // 64


def bytes_per_vector(width: int) -> int:
    """What one vector kept this way takes: its signs, its components and its scale."""
    return 8 * sign_words(width) + width + 4


def signs(units: np.ndarray) -> np.ndarray:
    """The rows' signs (a bit set where a component is above 0), word by word: sign_words(width)
    rows of uint64, one column per unit (a pair keeps each word of its vectors' signs apart, so
    that counting the signs a query differs in reads each word of every vector in turn)."""
    rows, width = units.shape
    packed = np.packbits(units > 0, axis=1, bitorder="little")
    padded = np.zeros((rows, 8 * sign_words(width)), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return np.ascontiguousarray(padded.view(np.uint64).T)


def components(units: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row in 8 bits, and its scale (row ~ codes * scale); a zero row has scale 0."""
    peak = np.abs(units).max(axis=1) if units.shape[1] else np.zeros(len(units), dtype=np.float32)
    scales = (peak / LEVELS).astype(np.float32)
    divisor = np.where(scales > 0, scales, 1.0).astype(np.float32)
    codes = np.clip(np.rint(units / divisor[:, None]), -LEVELS, LEVELS).astype(np.int8)
    return codes, scales


def closest(
    words: Sequence[np.ndarray],
    codes: np.ndarray,
    scales: np.ndarray,
    present: np.ndarray,
    query: np.ndarray,
    rescored: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The rows (of those `present`) closest to the unit `query`: the `rescored` whose signs differ
    least from the query's, each with its similarity from its 8-bit components (in no order).
    `words` are the rows' signs as `signs` gives them, a sequence of 64-bit words."""
    rescored = RESCORED if rescored is None else rescored
    query = np.asarray(query, dtype=np.float32)
    asked = signs(query[None, :])[:, 0]
    size = len(present)
    # Summed word by word in 16 bits, through two scratch columns: a pass over 100,000 rows is a
    # few tenths of a millisecond, and new columns of 64 and 32 bits each time cost as much again.
    differ = np.zeros(size, dtype=np.uint16)
    scratch, counted = np.empty(size, dtype=np.uint64), np.empty(size, dtype=np.uint8)
    for word, bits in zip(words, asked, strict=True):
        np.bitwise_xor(word, bits, out=scratch)
        np.bitwise_count(scratch, out=counted)
        differ += counted
    # In row order, the rows' components are read in the order they lie in memory.
    rows = fewest(differ, present, rescored, 64 * len(words)) if present.sum() > rescored else np.flatnonzero(present)
    similarity = (codes[rows].astype(np.float32) @ query) * scales[rows]
    return rows, similarity


def fewest(differ: np.ndarray, present: np.ndarray, count: int, most: int) -> np.ndarray:
    """The `count` rows (of those `present`, which are more) whose signs differ least (`differ`, at
    most `most`), in row order; of those that differ by as many as the last one taken, the latest
    rows. Found by counting the rows at each distance (the distances are small integers), not by
    partitioning them: a third of the time at 100,000 rows. Marks the absent rows in `differ`
    (beyond `most`), which closest computes for this call alone."""
    differ[~present] = most + 1  # no vector (yet, or any more): never a candidate
    edge = int(np.searchsorted(np.cumsum(np.bincount(differ, minlength=most + 2)), count))
    below = np.flatnonzero(differ < edge)  # fewer than `count`: the rest are taken at the edge
    tied = np.flatnonzero(differ == edge)[len(below) - count :]
    rows: np.ndarray = np.sort(np.concatenate([below, tied]))
    return rows

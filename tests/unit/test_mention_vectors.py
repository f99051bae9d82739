"""The mentions' embeddings held in the query service (`memora.retrieval.caches.mentions`): held by
the mention's position and by when it was written, so a re-embedded unit's old embedding is
never taken for its new one, whichever order the reads come back in."""

from __future__ import annotations

import numpy as np

from memora.retrieval.caches.mention_vectors import MentionVectors
from memora.retrieval.caches.mentions import Mentions


def _held(vectors: MentionVectors, positions: list[int], written: list[int]) -> list[int]:
    return vectors.held(np.array(positions), np.array(written, dtype=np.int64)).tolist()


def _add(
    vectors: MentionVectors, positions: list[int], written: list[int], rows: np.ndarray
) -> None:
    vectors.add(np.array(positions), np.array(written, dtype=np.int64), rows)


def test_an_embedding_is_held_as_its_mention_was_written() -> None:
    held = MentionVectors()
    eye = np.eye(4, dtype=np.float32)
    _add(held, [0, 1, 2], [5, 5, 7], eye[:3])
    assert _held(held, [2, 0, 9], [7, 5, 5]) == [2, 0, -1]  # position 9: beyond those held
    assert _held(held, [0], [6]) == [-1]  # written again since (re-embedded): not held
    _add(held, [0], [6], eye[3:])  # the newer one replaces it
    assert _held(held, [0, 0], [6, 5]) == [3, -1]
    _add(held, [0], [5], eye[:1])  # an older read coming back late is not kept
    assert _held(held, [0], [6]) == [3]
    assert held.gather(np.array([3, 1])).tolist() == [eye[3].tolist(), eye[1].tolist()]


def test_the_matrix_grows_and_keeps_its_rows() -> None:
    held = MentionVectors()
    added = np.random.default_rng(0).standard_normal((300, 8)).astype(np.float32)
    for start in range(0, 300, 7):  # many small additions, as searches make them
        positions = list(range(start, min(start + 7, 300)))
        _add(held, positions[::-1], [1] * len(positions), added[positions[::-1]])
    rows = held.held(np.arange(300), np.ones(300, dtype=np.int64))
    assert (rows >= 0).all()
    assert np.array_equal(held.gather(rows), added)


def test_entries_of_an_entity_share_its_embeddings_through_changes() -> None:
    bits = np.zeros((2, 6), dtype=np.uint64)
    first = Mentions.read(["a", "b"], bits, np.array([5, 5]), horizon=9)
    _add(first.vectors, [0, 1], [5, 5], np.eye(2, dtype=np.float32))
    # "b" re-embedded (written at 10), "c" added: the entry after the refresh
    later = first.merged(["b", "c"], bits, np.array([10, 11]), horizon=12)
    assert later.vectors is first.vectors and later.ids == ("a", "b", "c")
    assert later.written.tolist() == [5, 10, 11]
    assert later.vectors.held(np.arange(3), later.written).tolist() == [0, -1, -1]


def test_what_fits_counts_the_matrix_as_it_would_grow() -> None:
    """`fitting`: as many as the room takes once the matrix has doubled to hold them, else
    only those its free rows hold."""
    held = MentionVectors()
    width = 4
    row = 4 * width
    assert held.fitting(3, width, room=3 * row - 1) == 0  # nothing allocated yet
    assert held.fitting(3, width, room=3 * row) == 3
    _add(held, [0, 1, 2], [1, 1, 1], np.eye(3, 4, dtype=np.float32))  # 3 rows, all used
    assert held.fitting(1, width, room=0) == 0
    assert held.fitting(1, width, room=3 * row) == 1  # it doubles: 3 more rows
    _add(held, [3], [1], np.eye(1, 4, dtype=np.float32))  # 6 rows, 4 used
    assert held.fitting(2, width, room=0) == 2  # in the rows it has
    assert held.fitting(3, width, room=6 * row - 1) == 2  # growing to 12 rows would not fit
    assert held.fitting(3, width, room=6 * row) == 3


def test_the_nearest_without_some_rows_are_the_nearest_of_the_others() -> None:
    """`nearest_rows(without=...)`: the nearest `k` of the rows left (a broad filter's failing
    units taken out), ranked over all the signatures (none copied), as near as ranking only
    the others gives them (equal distances may come in either order)."""
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2**63, size=(400, 6), dtype=np.uint64)
    mentions = Mentions.read([f"u{i}" for i in range(400)], bits, np.zeros(400), horizon=1)
    query = rng.integers(0, 2**63, size=6, dtype=np.uint64)
    distance = np.bitwise_count(bits ^ query).sum(axis=1)
    nearest = np.argsort(distance, kind="stable")
    for k in (1, 10, 50):
        without = nearest[: k + 3 : 2]  # some of the very nearest
        others = np.setdiff1d(np.arange(400), without)
        found = mentions.nearest_rows(query, k, without=without)
        assert len(found) == k and not set(found.tolist()) & set(without.tolist())
        assert distance[found].tolist() == sorted(distance[others])[:k]
        assert distance[mentions.nearest_rows(query, k, without=without[:0])].tolist() == (
            distance[nearest[:k]].tolist()
        )

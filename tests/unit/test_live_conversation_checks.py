"""The checks behind issue 24's load test and benchmark, without a stack: what counts as lost,
duplicated or reordered, and how the bench cuts a conversation into live appends."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from loadtests.conversations import compare

sys.path.insert(0, str(Path(__file__).parents[2] / "bench"))
import append  # bench/ is not a package: found through the path above


def test_everything_stored_once_in_order() -> None:
    c = compare(["m1", "m2", "m3"], ["m1", "m2", "m3"])
    assert (c.lost, c.duplicated, c.extra, c.in_order) == ([], [], [], True)


def test_lost_duplicated_and_extra_are_told_apart() -> None:
    c = compare(["m1", "m2", "m3"], ["m1", "m3", "m3", "m9"])
    assert (c.lost, c.duplicated, c.extra, c.in_order) == (["m2"], ["m3"], ["m9"], True)


def test_order_is_that_of_the_acknowledged_messages() -> None:
    assert not compare(["m1", "m2", "m3"], ["m2", "m1", "m3"]).in_order
    # a message never acknowledged (its client gave up) may sit anywhere
    assert compare(["m1", "m3"], ["m1", "m2", "m3"]).in_order


def test_the_bench_appends_every_message_once_in_order_one_or_two_at_a_time() -> None:
    source = [{"role": "user", "speaker": "A", "content": f"turn {i}"} for i in range(50)]
    c = append.conversation("agent", "conv", iter(source), 41, random.Random(0))
    flat = [m for batch in c.appends for m in batch]
    assert flat == c.messages and len(flat) == 41
    assert {len(batch) for batch in c.appends} == {1, 2}
    times = [m["event_date"] for m in flat]
    assert times == sorted(times) and len(set(times)) == len(times)
    assert [m["message_id"] for m in flat] == [f"m{i:04d}" for i in range(41)]

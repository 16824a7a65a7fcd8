"""The pure decisions behind concurrency groups: how much room each group has, and which
of a claim's picks fit in it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from shoal import policy


def test_room_is_the_limit_less_what_is_held_never_below_zero() -> None:
    room = policy.group_room({"deploy": 1, "api": 3}, {"deploy": 2, "api": 1, "free": 9})
    assert room == {"deploy": 0, "api": 2}  # a group without a limit has no room to count


def test_picks_keep_their_order_and_each_group_its_room() -> None:
    picks = [("a", "api"), ("b", None), ("c", "api"), ("d", "deploy"), ("e", "api"), ("f", "x")]
    kept = policy.fit_groups(picks, lambda p: p[1], {"api": 2, "deploy": 0})
    assert kept == [("a", "api"), ("b", None), ("c", "api"), ("f", "x")]


@given(
    st.lists(st.sampled_from([None, "a", "b", "c"]), max_size=30),
    st.dictionaries(st.sampled_from(["a", "b"]), st.integers(0, 5)),
)
def test_no_group_gets_more_than_its_room(groups: list[str | None], room: dict[str, int]) -> None:
    kept = policy.fit_groups(groups, lambda g: g, room)
    for name, left in room.items():
        assert kept.count(name) == min(left, groups.count(name))
    assert [g for g in kept if g not in room] == [g for g in groups if g not in room]

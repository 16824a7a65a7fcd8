"""The fleet's orders, as pure functions: where a task stands in an agent's queue, and the
sort keys by which the owner, a thief and the pool read the work.

They are ``shoal.policy``'s (it exports them, and callers use them from there), kept here
so policy stays a reading.

An agent's queue
----------------
Each task in an agent's queue has one number, its place: the owner takes the largest place
of its highest priority first, a thief the smallest of the lowest. Places come from one
counter that only grows (``next_seq``), and the sign says whose work it is:

* work others send the agent (posted to it, moved to it) gets ``-n``: each later one
  behind the earlier ones, so the owner takes it in the order it came (FIFO) and a
  thief takes the one it would reach last, the newest;
* the agent's own work -- a child it spawned while holding the parent, a task it started
  and handed back -- gets ``+n``: in front of everything sent to it, the newest first
  (LIFO: depth-first, an agent finishes what it spawned, and a thief takes its oldest, the
  biggest piece of a tree);
* a task it deferred on others (a continuation, the join of a fork-join task) gets a place
  in a band of its own, below every other place (``join_place``: ``JOIN_TOP - n``). Once
  its children are done it is a *ready join*, and the claim reads the band apart, after
  everything else: the agent's own queue, the pool and a steal of other work come first,
  then its own ready joins, the first freed first, then another agent's ready join
  (``_claiming``'s *joins* step). A join only closes a subtree; the work still to split is
  what the rest of the tree waits on, so starting it first keeps agents busy to the end --
  and an agent that runs dry helps with the joins left when nothing else is.

A blocked task keeps its place while it waits; when it is freed, a join is numbered again
in its band (the first freed first), own work comes to the front again, and work sent by
others keeps its place in the order of posting (``place_when_ready``).

Longest first
-------------
With ``order = longest_first`` every step ranks tasks of equal priority by their
``expected_duration``, longest first, and tasks without one after those that have one: the
owner at its queue's head, a thief at the tail, and the pool (where, within a priority, the
score -- domain bonus and age -- then breaks ties). On a batch whose lengths are known
roughly, starting the long tasks first keeps one of them from starting last and holding up
the end (the longest-processing-time rule); it gives up the owner's newest-first order,
which fork-join work relies on.
"""

from __future__ import annotations

from typing import Any

from shoal.settings import Settings

__all__ = [
    "JOIN_TOP",
    "is_join_place",
    "is_own_place",
    "join_place",
    "length_rank",
    "longest_first",
    "place_band",
    "place_when_ready",
    "pool_order",
    "queue_order",
    "queue_place",
    "tail_order",
]

#: The highest place of the join band: a deferred task's place is at or below it, every
#: other place above it (``next_seq`` never comes near 2**62).
JOIN_TOP = -(2**62)
#: The lowest place a store's 64-bit integer holds: the band's floor.
_PLACE_FLOOR = -(2**63)
_PLACE_CEILING = 2**63 - 1


def longest_first(settings: Settings) -> bool:
    """Whether tasks of equal priority go longest expected first (the ``order`` setting)."""
    return settings.order == "longest_first"


def length_rank(expected: float | None) -> tuple[int, float]:
    """Longest expected first; tasks without an estimate after every task with one."""
    return (1, 0.0) if expected is None else (0, -expected)


def queue_place(own: bool, number: int) -> int:
    """A task's place in an agent's queue, from ``number`` (a fresh ``next_seq``): ``+n``
    for the agent's own work, in front and newest first; ``-n`` for work others send it,
    behind and in the order it came (the module docstring, *An agent's queue*)."""
    return number if own else -number


def join_place(number: int) -> int:
    """The place of a deferred task (a join), from ``number`` (a fresh ``next_seq``): in the
    join band, below every other place; of two joins the owner takes the one numbered first
    (the larger place), a thief the one numbered last."""
    return JOIN_TOP - number


def is_join_place(place: int) -> bool:
    """Whether a place is in the join band (a deferred task's)."""
    return place <= JOIN_TOP


def is_own_place(place: int) -> bool:
    """Whether a place is the agent's own work (in front) rather than work sent to it."""
    return place > 0


def place_band(joins: bool) -> tuple[int, int]:
    """The places a candidate query reads, lowest and highest (both included): the join
    band with ``joins``, every other place without."""
    return (_PLACE_FLOOR, JOIN_TOP) if joins else (JOIN_TOP + 1, _PLACE_CEILING)


def place_when_ready(place: int, number: int) -> int:
    """The place of a blocked task freed now (``number``: a fresh ``next_seq``): a join is
    numbered again in its band (the first freed first); the agent's own work -- a child it
    spawned to wait on others -- comes to the front; work sent by others keeps the place it
    was posted at."""
    if is_join_place(place):
        return join_place(number)
    return queue_place(True, number) if is_own_place(place) else place


def queue_order(priority: int, expected: float | None, seq: int, longest: bool) -> tuple[Any, ...]:
    """Sort key of an owner's queue, head first: highest priority, then largest place
    (``queue_place``: own work newest first, then work sent to it oldest first, then ready
    joins the first freed first) -- or, with ``longest``, longest expected before place."""
    if longest:
        return (priority, *length_rank(expected), -seq)
    return (priority, -seq)


def pool_order(
    priority: int, expected: float | None, pool_key: float, task_id: int, longest: bool
) -> tuple[Any, ...]:
    """Sort key of the pool by its static key (``policy.pool_key``), best first, then oldest
    id -- or, with ``longest``, by priority, then longest expected, then that key. Every
    store orders (and merges) its pool look-ups by it."""
    if longest:
        return (priority, *length_rank(expected), -pool_key, task_id)
    return (-pool_key, task_id)


def tail_order(priority: int, expected: float | None, seq: int, longest: bool) -> tuple[Any, ...]:
    """Sort key of a queue seen by a thief, tail first: the end its owner reaches last --
    lowest priority, then smallest place (the newest work sent to it, else its oldest own
    work) -- or, with ``longest``, longest expected before place."""
    if longest:
        return (-priority, *length_rank(expected), seq)
    return (-priority, seq)

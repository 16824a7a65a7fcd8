"""The claim cascade's look-ups, and the locality rules applied to them lazily.

``Fleet._claim`` (see the essay at the top of ``fleet.py``) decides; these helpers only
gather candidates for steps 3 and 4 from a store transaction: the pool's look-ups, a
victim's tail, and -- through ``Holds`` -- the locality rules, worked out only when some
candidate could be held.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from shoal import policy
from shoal.model import Agent, Candidate
from shoal.settings import Settings
from shoal.stores.base import StoreTx

__all__ = ["Holds", "pool_candidates", "steal_tail"]


class Holds:
    """The locality rules for one claim, worked out only when some candidate could be held.

    Most claims meet no task of another domain that is young enough to hold, and pay
    nothing: a candidate query runs with nothing held, and only if a candidate might be held
    are the rules made (asking the store which agents are idle, when ``domain_wait`` is on)
    and the query run again with them. ``retry_at`` remembers when the first task passed
    over is free to take.
    """

    def __init__(
        self,
        tx: StoreTx,
        agent: Agent,
        settings: Settings,
        now: float,
        skillsets: Mapping[int, tuple[str, ...]],
    ) -> None:
        self.tx, self.agent, self.settings, self.now = tx, agent, settings, now
        self.skillsets = skillsets
        self.retry_at: float | None = None
        self._rules: policy.Locality | None = None

    def _made(self) -> policy.Locality:
        if self._rules is None:
            settings, reserved = self.settings, frozenset[tuple[str, int]]()
            if settings.domain_wait > 0:
                idle = self.tx.idle_agents()
                reserved = policy.reserved_for(idle, self.agent.id, self.skillsets)
            self._rules = policy.locality(self.agent, settings, self.now, reserved)
        return self._rules

    def pick(self, fetch: Callable[[policy.Locality], list[Candidate]]) -> list[Candidate]:
        """``fetch(held)`` with the holds that apply to what it finds."""
        found = fetch(policy.NOTHING_HELD)
        agent, settings, now = self.agent, self.settings, self.now
        if not any(policy.might_hold(c.domain, _ready(c), agent, settings, now) for c in found):
            return found
        rules = self._made()
        ends = (rules.free_at(c.domain, c.skillset, _ready(c)) for c in found)
        held = [end for end in ends if end is not None]
        if not held:
            return found
        first = min(held)
        self.retry_at = first if self.retry_at is None else min(self.retry_at, first)
        return fetch(rules)


def _ready(candidate: Candidate) -> float:
    return policy.ready_time(candidate.ready_at, candidate.created_at)


def steal_tail(
    tx: StoreTx, victim: str, rules: policy.StealFilter, held: policy.Locality, *, now: float
) -> list[Candidate]:
    """Step 4's look-up: the one task a thief would take from ``victim``'s tail (ready by
    ``now``)."""
    return tx.steal_tail(victim, rules, held, 1, now)


def pool_candidates(
    tx: StoreTx,
    domains: Sequence[str],
    eligible: Sequence[int],
    want: int,
    longest: bool,
    held: policy.Locality,
    now: float,
) -> list[Candidate]:
    """Step 3's look-ups: the top of the pool by static key among the skill sets the agent
    can do, then within each of its ``domains`` (for the domain bonus), and with ``longest``
    the top by priority and expected duration -- of the tasks ready by ``now``. Unranked;
    ``policy.rank_pool`` merges them."""
    found = tx.pool_best(eligible, None, want, held, now)
    if not found:  # nothing that is not held: the other look-ups are subsets of this one
        return found
    for domain in domains:
        found += tx.pool_best(eligible, domain, want, held, now)
    if longest:
        found += tx.pool_longest(eligible, want, held, now)
    return found

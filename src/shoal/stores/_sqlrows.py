"""Between model values and SQL: rows into agents, candidates and skill sets, and the
parameters of the locality rules -- the same for every dialect (see ``_sqltx``)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from shoal import policy
from shoal.model import Agent, AgentStatus, Candidate
from shoal.policy import Locality

__all__ = [
    "STATUSES",
    "RowOrder",
    "agent_of",
    "best_first",
    "candidate_of",
    "longest_first",
    "split_skills",
    "unheld_params",
]

STATUSES = {s.value: s for s in AgentStatus}
#: A sort key over rows from the driver.
RowOrder = Callable[[Sequence[Any]], Any]


def best_first(row: Sequence[Any]) -> tuple[Any, ...]:
    """``policy.pool_order`` of a candidate row with its pool_key after it."""
    return policy.pool_order(row[2], row[10], row[13], row[0], False)


def longest_first(row: Sequence[Any]) -> tuple[Any, ...]:
    """``policy.pool_order`` with ``longest``, of a candidate row with its pool_key."""
    return policy.pool_order(row[2], row[10], row[13], row[0], True)


@functools.lru_cache(maxsize=256)
def unheld_params(held: Locality, json_lists: bool) -> dict[str, Any]:
    """The parameters of the ``unheld`` condition (see queries.sql) for ``held``: the same
    few (nothing held, for most claims) again and again, so they are made once. Callers
    copy them into their own parameters and never change them."""
    pairs = sorted(held.reserved)
    lists = {
        "own_domains": list(held.domains),
        "reserved_domains": [domain for domain, _ in pairs],
        "reserved_skillsets": [skillset for _, skillset in pairs],
        "full_groups": sorted(held.full_groups),
    }
    return {
        **{k: json.dumps(v) if json_lists else v for k, v in lists.items()},
        "local_since": held.local_since,
        "domain_since": held.domain_since,
    }


def agent_of(row: Sequence[Any]) -> Agent:
    """An agent from the columns of the ``agent`` fragment."""
    return Agent(
        id=row[0],
        role=row[1],
        skills=tuple(json.loads(row[2])),
        domains=tuple(json.loads(row[3])),
        max_concurrent=row[4],
        manager=bool(row[5]),
        ephemeral=bool(row[6]),
        status=STATUSES[row[7]],
        idle_since=row[8],
        last_seen=row[9],
        registered_at=row[10],
        incarnation=row[11],
        queued=int(row[12]),
        failures=int(row[13]),
        paused_until=row[14],
    )


def candidate_of(row: Sequence[Any]) -> Candidate:
    """A candidate from the columns of the ``candidate`` fragment."""
    return Candidate(
        row[0],  # id
        row[1],  # title
        row[2],  # priority
        row[3],  # domain
        row[4],  # agent
        bool(row[5]),  # pinned
        row[6],  # created_at
        row[7],  # lease_ttl
        row[8],  # attempts
        row[9],  # skillset
        row[10],  # expected_duration
        row[11],  # ready_at
        row[12],  # group
    )


def split_skills(skills: str) -> tuple[str, ...]:
    """A skill set as stored (sorted names joined by commas; '' for none)."""
    return tuple(skills.split(",")) if skills else ()

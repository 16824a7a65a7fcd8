"""The hub: reap, rebalance, assess -- and prune, when the fleet keeps history for a while
only -- on an interval (what ``shoal monitor`` runs).

None of the hub's jobs is needed for correctness -- a claim takes back an expired lease on
its own -- but they make recovery timely (silent agents go offline and their queues go back
to the pool; idle ephemeral agents end), keep queues even (rebalance feeds agents idle for a
while), keep a fresh assessment in the fleet for ``status`` and for a supervisor, and, with
``history_retention`` set, delete history older than that (at most ``limits.PRUNE_PER_PASS``
tasks a pass, so a large backlog goes over several passes).

``Hub.step()`` is one pass and returns what it did as ``HubAction`` records, one per thing
that happened, each with a line of words for people; ``Hub.run`` repeats it. The assessment
is reported when its verdict changes, not every pass, so a quiet fleet makes a quiet log.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from shoal._log import get_logger
from shoal.errors import StoreUnavailable
from shoal.fleet import Fleet
from shoal.limits import PRUNE_PER_PASS
from shoal.model import Assessment, Move, PruneReport, ReapReport
from shoal.times import iso_time

__all__ = ["Hub", "HubAction", "HubPass"]

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class HubAction:
    """One thing the hub did: ``kind`` (expired, dead, offline, returned, terminated, resumed,
    stalled, moved, assessed, pruned, error), its data, and a sentence for people. A supervisor
    reports what it does in the same shape (``SupervisorEvent``)."""

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, **self.data}


@dataclass(frozen=True, slots=True)
class HubPass:
    """One pass of the hub: what reap, rebalance and prune did, and the assessment."""

    reap: ReapReport
    moves: tuple[Move, ...]
    assessment: Assessment
    actions: tuple[HubAction, ...]
    pruned: PruneReport = field(default_factory=PruneReport)


def _ids(values: tuple[int, ...]) -> str:
    return ", ".join(f"#{i}" for i in values)


#: A sentence per field of the reap report, in its order: agents get one action each
#: (``{agent}``), tasks one action for them all (``{tasks}``).
_REAP_SAYS = {
    "expired": "leases expired: {tasks} back to pending",
    "dead": "leases expired with no attempts left: {tasks} dead",
    "offline": "{agent} went silent: offline",
    "returned": "queued work of offline agents back to the pool: {tasks}",
    "terminated": "{agent} idle (or away) too long: terminated",
    "stalled": "running well past their expected duration: {tasks}",
    "resumed": "{agent} paused by the circuit breaker: its cooldown is over, it may claim again",
    "posted": "recurring tasks fell due: {tasks} posted",
}


def reap_actions(report: ReapReport) -> list[HubAction]:
    """One action per kind of thing reap did (per agent, for agents)."""
    actions = []
    for kind, says in _REAP_SAYS.items():
        values = getattr(report, kind)
        if "{agent}" in says:
            actions += [HubAction(kind, says.format(agent=a), {"agent": a}) for a in values]
        elif values:
            actions.append(
                HubAction(kind, says.format(tasks=_ids(values)), {"tasks": list(values)})
            )
    return actions


class Hub:
    """Reap, rebalance and assess a fleet, one pass at a time."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet
        self._verdict: tuple[str, str] | None = None

    def step(self) -> HubPass:
        """One pass: reap, then rebalance, then assess, then prune (``history_retention``)."""
        report = self.fleet.reap()
        moves = tuple(self.fleet.rebalance())
        assessment = self.fleet.assess()
        pruned = self.fleet.prune(limit=PRUNE_PER_PASS)
        actions = reap_actions(report)
        for action in actions:
            log.info("%s", action.text)
        for move in moves:
            log.info(
                "rebalance: #%d %s -> %s (p%d %r)",
                move.task_id,
                move.from_agent,
                move.to_agent,
                move.priority,
                move.title,
            )
            actions.append(
                HubAction(
                    "moved",
                    f"rebalance: #{move.task_id} {move.from_agent} -> {move.to_agent} "
                    f"(p{move.priority} {move.title})",
                    move.to_dict(),
                )
            )
        verdict = (assessment.workload, assessment.recommendation)
        log.debug(
            "hub pass: %d reaped, %d moved; %s -> %s",
            len(actions),
            len(moves),
            assessment.workload,
            assessment.recommendation,
        )
        if verdict != self._verdict:
            log.info(
                "assess: %s -> %s (%s)",
                assessment.workload,
                assessment.recommendation,
                assessment.reason,
            )
            self._verdict = verdict
            actions.append(
                HubAction(
                    "assessed",
                    f"assess: {assessment.workload} -> {assessment.recommendation} "
                    f"({assessment.reason})",
                    assessment.to_dict(),
                )
            )
        if pruned:
            text = (
                f"history before {iso_time(pruned.cutoff)} deleted: {pruned.tasks} tasks, "
                f"{pruned.events} events{' (more next pass)' if pruned.more else ''}"
            )
            log.info("prune: %s", text)
            actions.append(HubAction("pruned", text, pruned.to_dict()))
        return HubPass(report, moves, assessment, tuple(actions), pruned)

    def run(
        self,
        interval: float,
        stop: threading.Event,
        on_action: Callable[[HubAction], None],
    ) -> None:
        """Pass after pass, ``interval`` seconds apart, until ``stop`` is set. A store that is
        briefly unavailable costs a pass, not the loop."""
        while not stop.is_set():
            try:
                for action in self.step().actions:
                    on_action(action)
            except StoreUnavailable as exc:
                log.warning("hub pass skipped: store unavailable: %s", exc.message)
                on_action(HubAction("error", f"store unavailable: {exc.message}", {}))
            stop.wait(interval)

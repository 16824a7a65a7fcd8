"""The agent registry's verbs of ``Fleet``: joining, looking agents up, their status.

``Fleet`` inherits them (``_verbbase`` says why it is built of parts); their bodies run in
``_agents`` and ``_transitions``, inside the one transaction each verb opens. The verbs an
agent uses while it works -- ``leases``, ``heartbeat``, the claim -- are in ``_leaseverbs``.
"""

from __future__ import annotations

from collections.abc import Iterable

from shoal.errors import BadInput
from shoal.fleet._agents import pause_in, register_in, set_status_in
from shoal.fleet._conflicts import rerun_on_conflict
from shoal.fleet._liveness import agents_as_of
from shoal.fleet._transitions import live_agent, resume_agent, unknown_agent
from shoal.fleet._verbbase import FleetBase
from shoal.limits import MAX_DURATION
from shoal.model import Agent, Probe, Registration
from shoal.times import iso_time
from shoal.validation import (
    NEW_AGENT_ID,
    check_agent_id,
    check_joining_agent_id,
    check_max_concurrent,
    check_text,
    normalize_names,
    parse_agent_status,
    parse_duration,
)
from shoal.vocabulary import AgentStatus

__all__ = ["AgentVerbs"]


class AgentVerbs(FleetBase):
    """Register agents, look them up, and set, pause or resume their status; ``probe``."""

    @rerun_on_conflict
    def register(
        self,
        agent_id: str,
        *,
        role: str = "worker",
        skills: Iterable[str] | str | None = None,
        domains: Iterable[str] | str | None = None,
        max_concurrent: int = 1,
        manager: bool = False,
        ephemeral: bool = False,
    ) -> Registration:
        """Join the fleet (or update a live registration).

        Live non-manager agents may not exceed ``max_agents``; terminated agents do not count,
        re-registering a live agent updates it, and managers are always admitted. A
        terminated id registered again starts a new incarnation.

        A new agent's id is letters, digits and ``. _ - @ :`` (``check_joining_agent_id``); a
        live agent an older version registered under another id (with ``/``, say) may
        still register again, so its workers keep running, but nothing new takes such an id.
        """
        new_id_ok = NEW_AGENT_ID.fullmatch(check_agent_id(agent_id)) is not None
        skill_names = normalize_names(skills, "skill")
        domain_names = normalize_names(domains, "domain")
        role = check_text(role, "role", 64, line=True) or "worker"
        check_max_concurrent(max_concurrent)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            if not new_id_ok:
                check_joining_agent_id(agent_id, tx.get_agent(agent_id))
            return register_in(
                tx,
                now,
                agent_id,
                role=role,
                skill_names=skill_names,
                domain_names=domain_names,
                max_concurrent=max_concurrent,
                manager=manager,
                ephemeral=ephemeral,
            )

    def agent(self, agent_id: str) -> Agent:
        """The agent with that id (terminated ones included), as the liveness rules make it
        now: offline once silent past heartbeat_timeout, its pause over once past
        ``paused_until`` -- whether or not anything has written that down yet."""
        check_agent_id(agent_id)
        with self._store.read() as tx:
            agent = tx.get_agent(agent_id)
            if agent is None:
                raise unknown_agent(agent_id)
            (seen,) = agents_as_of(tx, self.clock.now(), tx.load_settings(), [agent])
            return seen

    def agents(self) -> list[Agent]:
        """Every agent the fleet has seen, by id, as the liveness rules make it now (see
        ``agent``)."""
        with self._store.read() as tx:
            return agents_as_of(tx, self.clock.now(), tx.load_settings(), tx.list_agents())

    @rerun_on_conflict
    def set_status(
        self,
        agent_id: str,
        status: AgentStatus | str,
        *,
        why: str | None = None,
        release: bool = False,
    ) -> Agent:
        """Report an agent's status (idle, working, waiting, offline, terminated).

        Entering ``idle`` stamps ``idle_since``; leaving it clears it. An agent that holds
        tasks is not idle: that is refused (naming them) unless ``release``, which gives
        them back first, untouched (with any status: an agent leaving for a while can give
        back its work at once). ``terminated`` is final: the agent's leases are released
        (not counted as failures) and its queue goes back to the pool, except tasks pinned
        to it. ``offline`` sends its queue back too (its leases run on unless ``release``:
        it may return before they expire). ``why`` goes in the termination's event (a worker
        leaving when idle says so). ``paused`` is set by a pause (the circuit breaker's or
        ``pause``) and ended by its time or by ``resume``.
        """
        new_status = parse_agent_status(status)
        check_agent_id(agent_id)
        reason = check_text(why, "why", 200, line=True) if why is not None else None
        if new_status is AgentStatus.PAUSED:
            raise BadInput(
                "paused is set by a pause, not reported: an agent is paused by the circuit "
                "breaker after failure_streak failures in a row, or by a person",
                hint="pause it with `shoal agent pause AGENT --for 1h`",
            )
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            return set_status_in(tx, now, agent_id, new_status, reason, release)

    @rerun_on_conflict
    def pause(self, agent_id: str, *, for_: float | str = 3600.0) -> Agent:
        """Hold an agent for ``for_`` (seconds or 30m, 2h) or until ``resume``: its claims
        get nothing (reason ``paused``), its queue goes back to the pool, and the leases it
        holds run on. The circuit breaker's own hold, asked for by a person (status
        ``paused`` until ``paused_until``, event ``agent.paused`` with ``by: request``)."""
        check_agent_id(agent_id)
        seconds = parse_duration(for_, "for")
        if not 0 < seconds <= MAX_DURATION:
            raise BadInput(
                f"a pause must last more than 0 and at most 10 years, not {for_!r}",
                hint="e.g. 30m, 2h, 1d; resume sooner with `shoal agent resume`",
            )
        with self._store.write(exclusive=True) as tx:
            return pause_in(tx, self.clock.now(), agent_id, seconds)

    @rerun_on_conflict
    def resume(self, agent_id: str) -> Agent:
        """Let an agent the circuit breaker paused claim again now (its failure count starts
        over). Resuming an agent that is not paused changes nothing."""
        check_agent_id(agent_id)
        with self._store.write(exclusive=True) as tx:
            now = self.clock.now()
            agent = live_agent(tx, agent_id)
            if agent.paused_until is None:
                return agent
            return resume_agent(tx, agent, now, "request")

    @rerun_on_conflict
    def probe(self) -> Probe:
        """Prove the store takes a write (it records when it was last probed), and read its
        server's clock in the same transaction: what ``shoal doctor`` checks."""
        with self._store.write() as tx:
            now = self.clock.now()
            tx.set_meta("last_probe", iso_time(now) or "")
            return Probe(now, tx.server_time())

"""Who an MCP session acts as, what it holds, and how it leaves the fleet when it ends.

The desk is what ``shoal mcp``'s tools share: the fleet, the agent the server is pinned to
(``--agent``) and the sessions it serves with the agents each holds. It knows nothing of the
MCP SDK (``tooling`` ties SDK connections to ``Session`` objects), so it can be read,
and reasoned about, as plain fleet bookkeeping.

Sessions and agents
-------------------
A session is one client connection: over stdio the server process, over streamable HTTP one
``mcp-session-id``. A session *holds* the agents it stands for:

- pinned (``--agent X``): every session holds X. X is registered when the server starts
  (the first session takes it as it is) and again when a later session first acts (so a new
  session takes the identity back after an earlier one left).
- unpinned: a session holds the agents it registers with ``register_agent`` (its own; later
  calls act as the last one by default) and those it takes up by naming them in a call
  (adopted). An agent someone else drives is refused (``AgentInUse``): one another live
  session holds, or (as the store says) one holding tasks or heard from within
  heartbeat_timeout -- so a session cannot act as another's agent, at work or between
  tasks, even one served by another ``shoal mcp`` process or a ``shoal worker``.

A session silent for the fleet's ``heartbeat_timeout`` (no tool call in flight, none
begun since) no longer blocks: a client that crashed without ending its HTTP session comes
back in a new one and takes its agent up again, as the fleet itself counts the agent gone
by then. The silent session lets the agent go (it leaves nothing when it ends later); the
tasks the agent holds stay under their leases, and the new session finishes them with
their tokens (it does not inherit the right to leave them out) or lets them expire.

Managers
--------
Tools that act on others' work or on the fleet itself (cancel, retry and reprioritise
tasks, pause and resume agents, assess the workload, configure the fleet) are a manager's.
Only the operator makes one: a server pinned with ``--agent ID --manager`` (``manager``).
Every other server -- a pinned worker, and any unpinned one, whose sessions register
themselves -- neither lists those tools nor runs them (``not_a_manager``), and a session
cannot make itself a manager with ``register_agent``.

When the last session holding an agent ends (stdio EOF, the client closing, an HTTP session
deleted or idle past its TTL, the server stopping), the agent leaves: a session's own agent
is terminated (its tasks go back, its place under max_agents is freed); the pinned agent
releases every task it holds (back to its queue or the pool, no attempt counted) and goes
offline, keeping its identity for the next session -- unless it is ephemeral, then it is
terminated too. Agents a session adopted are someone else's: they are let go, left alone.

Starting never fails
--------------------
A fleet that cannot be opened, or a pinned agent that cannot be registered (the fleet is
full, the id is bad), does not stop the server: the fault is kept, the server answers the
handshake, and every tool that needs the fleet (or the agent) tries again and, failing,
answers with the error -- so the client can show it instead of a dead server.

Leases
------
A call that ends a lease (complete, fail, release) proves it one of two ways (I8 in
docs/ARCHITECTURE.md): by its token, or by the task being held, in the store, by an agent
this session holds -- then the token is read from the store (``Fleet.leases``), so a model
may leave it out. Nothing about leases is kept in the server's memory: what the store says
is the truth, on stdio and HTTP alike and after a restart. A refusal says the lease is not
the caller's, never whose it is.
"""

from __future__ import annotations

import contextlib
import hmac
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from shoal._log import get_logger
from shoal.clock import Clock
from shoal.errors import AgentInUse, LeaseLost, ShoalError, UnknownAgent
from shoal.faces.mcp.errors import AlreadyDone, ForeignAgent, NoAgent, NotAManager, NoToken
from shoal.fleet import Fleet
from shoal.model import Agent, AgentStatus, Claim, Lease, Registration, Task, TaskState

__all__ = ["FleetDesk", "Session"]

log = get_logger("shoal.mcp")

_ENDED = "its MCP session ended"


class Session:
    """One MCP client connection, and the agents it holds."""

    def __init__(self, name: str, now: float) -> None:
        self.name = name  # "stdio", or the HTTP session id
        self.default: str | None = None  # the agent calls act as when they name none
        self.own: set[str] = set()  # registered in this session: they leave when it ends
        self.attached = False  # pinned: this session has taken the server's agent
        self.ended = False
        self.seen = now  # when its last tool call began or ended (the desk's clock)
        self.calls = 0  # its tool calls in flight
        #: (task, token) of the leases its agent held when it was taken from a silent
        #: session: finished only with their token.
        self.inherited: set[tuple[int, str]] = set()

    def silent(self, now: float, timeout: float) -> bool:
        """No tool call in flight, and none begun or ended for longer than ``timeout``."""
        return self.calls == 0 and now - self.seen > timeout

    def __repr__(self) -> str:
        return f"Session({self.name!r})"


class FleetDesk:
    """What the tools share: the fleet, who the server acts as, its sessions and their agents.

    ``fleet`` is the fleet or a function that opens it (tried again on each use until it
    works). ``fixed`` is the agent given with ``--agent`` and ``spec`` its registration
    (``Fleet.register``'s keywords); None: each call names its agent, or uses the one its
    session registered. ``clock`` times the sessions' silences: the fleet's by default
    (the system's until an opener has opened it).
    """

    def __init__(
        self,
        fleet: Fleet | Callable[[], Fleet],
        fixed: str | None = None,
        spec: Mapping[str, Any] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._fleet = fleet if isinstance(fleet, Fleet) else None
        self._open = None if isinstance(fleet, Fleet) else fleet
        self._clock = clock
        self.fixed = fixed
        self.spec = dict(spec or {})
        self._lock = threading.RLock()
        self._opening = threading.Lock()
        self._holders: dict[str, set[Session]] = {}
        self._sessions: set[Session] = set()
        self._registering = threading.Lock()
        self._in = False  # the pinned agent is in the fleet through this server
        self._lasting: Session | None = None  # the stdio session: the process's
        self.registration: Registration | None = None  # the pinned agent's, at start

    # the fleet ----------------------------------------------------------

    @property
    def fleet(self) -> Fleet:
        """The fleet, opened now if it could not be before (its error if it still cannot)."""
        if self._fleet is None:
            with self._opening:
                if self._fleet is None:
                    assert self._open is not None
                    self._fleet = self._open()
        return self._fleet

    @property
    def pinned(self) -> bool:
        return self.fixed is not None

    @property
    def manager(self) -> bool:
        """Whether this server's sessions may act on others' work and on the fleet: only a
        server the operator pinned to a manager (``--agent ID --manager``)."""
        return self.fixed is not None and bool(self.spec.get("manager"))

    def now(self) -> float:
        """The time on the desk's clock (the fleet's, once it is open)."""
        if self._clock is not None:
            return self._clock.now()
        if self._fleet is not None:
            return self._fleet.clock.now()
        return time.time()

    @property
    def url(self) -> str | None:
        """The fleet's URL fit to show (no password), once it is open."""
        return None if self._fleet is None else self._fleet.where

    def start(self) -> ShoalError | None:
        """Open the fleet and register the pinned agent (kept in ``registration``); the
        fault that stopped it, if any (the server starts all the same, and its tools report
        the fault until it is gone)."""
        try:
            fleet = self.fleet
            if self.fixed is not None:
                self.registration = fleet.register(self.fixed, **self.spec)
                self._in = True
        except ShoalError as exc:
            return exc
        return None

    def close(self) -> None:
        """The server stops: every session still open ends, and the pinned agent leaves if
        it is still in (registered at start, and no session ever took it)."""
        with self._lock:
            open_now = list(self._sessions)
        for session in open_now:
            self.end_session(session)
        if self.fixed is not None and self._in:
            self._leave(self.fixed)

    # sessions -----------------------------------------------------------

    def open_session(self, name: str) -> Session:
        session = Session(name, self.now())
        with self._lock:
            self._sessions.add(session)
        return session

    def lasting_session(self, name: str) -> Session:
        """The one session of a server whose client is the process's (stdio): opened on
        first use, ended when the server stops (``close``)."""
        with self._lock:
            if self._lasting is None:
                self._lasting = Session(name, self.now())
                self._sessions.add(self._lasting)
            return self._lasting

    @contextlib.contextmanager
    def calling(self, session: Session) -> Iterator[None]:
        """A tool call of ``session`` runs: it is not silent meanwhile, nor for a
        heartbeat_timeout after."""
        with self._lock:
            session.calls += 1
            session.seen = self.now()
        try:
            yield
        finally:
            with self._lock:
                session.calls -= 1
                session.seen = self.now()

    def holding(self) -> set[str]:
        """The names of the sessions that hold an agent (an HTTP session's is its id)."""
        with self._lock:
            return {s.name for holders in self._holders.values() for s in holders}

    def end_session(self, session: Session) -> list[str]:
        """The session is over: each agent of its own (or the pinned one) that no other
        session holds leaves the fleet; agents it adopted are let go (module docstring).
        Returns the agents that left; faults are logged, never raised."""
        with self._lock:
            if session.ended:
                return []
            session.ended = True
            self._sessions.discard(session)
            leaving = []
            for agent, holders in list(self._holders.items()):
                if session in holders:
                    holders.discard(session)
                    if not holders:
                        del self._holders[agent]
                        if agent == self.fixed or agent in session.own:
                            leaving.append(agent)
        for agent in leaving:
            self._leave(agent)
        return leaving

    def _hold(self, session: Session, agent: str) -> None:
        with self._lock:
            self._holders.setdefault(agent, set()).add(session)

    def _take(self, session: Session | None, agent: str) -> None:
        """``session`` takes ``agent`` up, unless someone else drives it: another session
        of this server holds it and has not been silent for heartbeat_timeout, or (read
        from the store, so it holds across processes) no session here holds it and it
        holds leases, or the fleet heard from it within heartbeat_timeout (a worker between
        tasks, another server's agent). Either way ``AgentInUse``: one agent, one driver --
        a session steered by what it read cannot take over an agent at work, claim the
        work queued for it, or end it. From silent sessions the agent is taken, its leases
        with it -- to be finished with their tokens (module docstring); so is an agent the
        fleet counts gone (a client back after its server process died). A session of no
        connection (stateless HTTP) holds nothing, but is refused such an agent all the
        same."""
        if session is not None and session in self._holders.get(agent, ()):
            return
        timeout = self.fleet.settings().heartbeat_timeout
        try:
            leases, known = self.fleet.leases(agent), self.fleet.agent(agent)
        except UnknownAgent:  # not in the fleet (yet): the call says so, or registers it
            leases, known = [], None
        with self._lock:
            holders = self._holders.get(agent, set())
            others = holders - {session}
            now = self.now()
            silent = {s for s in others if s.silent(now, timeout)}
            heard = known is not None and _present(known, now, timeout)
            if others - silent or (not silent and (leases or heard)):
                raise AgentInUse(
                    f"agent {agent!r} is driven by another session or process (it holds a "
                    f"task, or the fleet heard from it in the last {timeout:g} s); a session "
                    "acts only as the agents it registered, or takes up one nobody drives",
                    hint="register an agent of your own (register_agent), or pass the lease "
                    "token to finish a task you were handed; an agent of yours whose client "
                    "died is yours again once the fleet has not heard from it for "
                    "heartbeat_timeout",
                )
            for gone in silent:  # it lets the agent go: leaving nothing when it ends
                holders.discard(gone)
                gone.own.discard(agent)
                log.info("shoal mcp: session %s was silent; agent %s taken up", gone.name, agent)
            if session is not None:
                holders.add(session)
                self._holders[agent] = holders
                if silent:
                    session.inherited |= {(lease.task_id, lease.token) for lease in leases}
            elif not holders:
                self._holders.pop(agent, None)

    def holds(self, session: Session | None, agent: str | None) -> bool:
        """Whether ``session`` holds ``agent`` (every session holds the pinned agent)."""
        if agent is None:
            return False
        if agent == self.fixed:
            return True
        with self._lock:
            return session is not None and session in self._holders.get(agent, set())

    def _leave(self, agent: str) -> None:
        """``agent`` leaves: terminated if it is a session's own (or ephemeral), else its
        tasks are released untouched and it goes offline. The pinned agent leaves under the
        registration lock, so a session arriving meanwhile registers it again after."""
        if agent != self.fixed:
            self._step_out(agent, terminate=True)
            return
        with self._registering:
            with self._lock:
                if agent in self._holders:  # a new session took it in the meantime
                    return
            self._in = False
            self._step_out(agent, terminate=bool(self.spec.get("ephemeral")))

    def _step_out(self, agent: str, *, terminate: bool) -> None:
        try:
            fleet = self.fleet
            if terminate:
                fleet.set_status(agent, "terminated", why=_ENDED)
                return
            fleet.set_status(agent, "offline", release=True)  # its tasks back, untouched
        except UnknownAgent:
            pass  # terminated already (by itself or a manager): nothing left to do
        except ShoalError as exc:
            log.warning("shoal mcp: agent %s could not leave the fleet: %s", agent, exc)

    # identity -----------------------------------------------------------

    def acting(self, session: Session | None, agent: str | None) -> str:
        """The agent a call acts as. Pinned: the fixed agent (another is refused), taken by
        this session first if it has not been yet. Unpinned: the agent named (taken up by
        this session, or ``AgentInUse`` if another session holds it), else the session's
        default."""
        if self.fixed is not None:
            if agent is not None and agent != self.fixed:
                raise ForeignAgent(
                    f"this server acts as agent {self.fixed!r} (shoal mcp --agent "
                    f"{self.fixed}); it cannot act as {agent!r}"
                )
            self._attach(session)
            return self.fixed
        if agent is not None:
            self._take(session, agent)
            return agent
        known = session.default if session is not None else None
        if known is None:
            raise NoAgent("this call needs an agent, and this session has not registered one")
        if not self.holds(session, known):
            raise AgentInUse(
                f"agent {known!r} was taken up by another session while this one was silent "
                "for longer than the fleet's heartbeat_timeout",
                hint="register an agent again (register_agent); tasks you were handed need "
                "their lease tokens",
            )
        return known

    def poster(self, session: Session | None) -> str | None:
        """The agent a post through ``session`` is recorded as posted by (``Task.posted_by``),
        and the one whose posts it may edit: the pinned agent, else the agent the session
        registered and still holds; None for a session that is no agent (yet). Never an id
        the caller names: a post cannot be put on another agent's name."""
        if self.fixed is not None:
            return self.fixed
        known = session.default if session is not None else None
        return known if self.holds(session, known) else None

    def you(self, session: Session | None) -> str | None:
        """Who the session is, for read-only views (registers nothing)."""
        if self.fixed is not None:
            return self.fixed
        return session.default if session is not None else None

    def _attach(self, session: Session | None) -> None:
        """Pinned: the session takes the server's agent, registering it first unless it is
        in the fleet through this server already (registered at start, or held by another
        session). A registration that fails is tried again on the next call."""
        if session is not None and session.attached:
            return
        assert self.fixed is not None
        with self._registering:
            if not self._in:
                self.fleet.register(self.fixed, **self.spec)
                self._in = True
            if session is not None:
                self._hold(session, self.fixed)
                session.attached = True

    def register(self, session: Session | None, agent: str, **spec: Any) -> Registration:
        """Register ``agent`` as ``session``'s own (unpinned servers only): it acts as the
        session's default from now on, and leaves the fleet when the session ends. An agent
        another session holds is refused before anything is written (``AgentInUse``), and
        so is a live manager's id (``NotAManager``): registering it would take the manager's
        place in the fleet."""
        try:
            known = self.fleet.agent(agent)
        except UnknownAgent:
            known = None
        if known is not None and known.manager and known.status is not AgentStatus.TERMINATED:
            raise NotAManager(
                f"agent {agent!r} is a manager; a session here cannot register as it",
                hint="register an agent id of your own; managers are made by the operator only",
            )
        self._take(session, agent)
        try:
            reg = self.fleet.register(agent, **spec)
        except ShoalError:
            if session is not None and agent not in session.own:
                self._let_go(session, agent)
            raise
        if session is not None:
            session.own.add(agent)
            session.default = agent
        return reg

    def _let_go(self, session: Session, agent: str) -> None:
        with self._lock:
            holders = self._holders.get(agent)
            if holders is not None:
                holders.discard(session)
                if not holders:
                    del self._holders[agent]

    # leases -------------------------------------------------------------

    def lease_for(
        self, session: Session | None, agent: str | None, task_id: int, token: str | None
    ) -> Lease:
        """The lease a call ends ``task_id`` under, proven by ``token`` or, without one, by
        the task being held (in the store) by an agent ``session`` holds (I8). Refused
        here, before the core is asked: a task done already, and a lease not the caller's
        -- in words that never name the agent that does hold it."""
        who = self.acting(session, agent) if agent is not None or self.pinned else None
        if not token:
            who = self.acting(session, agent)
        task = self.fleet.get(task_id)
        mine = self.holds(session, task.agent)
        if task.state is TaskState.DONE:
            by = f" by agent {task.agent}" if mine and task.agent else ""
            raise AlreadyDone(f"task {task_id} is done already{by}; nothing was changed")
        held = self._held_lease(task) if task.state is TaskState.CLAIMED else None
        if token:
            if held is not None and not mine and not _same(held.token, token):
                raise LeaseLost(
                    f"lease lost: that token is not the lease of task {task_id}; nothing was "
                    "changed",
                    hint="check the token; if your lease ran out, the task was claimed again",
                )
            holder = task.agent if held is not None else who
            return Lease(task_id=task_id, agent=holder or "", token=token, expires=0.0)
        if held is not None and mine:
            if session is not None and (task_id, held.token) in session.inherited:
                raise NoToken(
                    f"task {task_id} was claimed before this session took its agent up; "
                    "finishing it needs its lease token"
                )
            return held
        state = "held under a lease that is not yours" if held else task.state.value
        raise LeaseLost(
            f"lease lost: task {task_id} is {state}; agent {who!r} holds no lease on it",
            hint="pass the lease token if you were handed it; else claim a new task",
        )

    def _held_lease(self, task: Task) -> Lease | None:
        """The live lease on ``task``, as the store has it (None if there is none)."""
        if task.agent is None:
            return None
        try:
            leases = self.fleet.leases(task.agent)
        except UnknownAgent:
            return None
        return next((lease for lease in leases if lease.task_id == task.id), None)

    def claim(self, agent: str, wait: float) -> Claim:
        """One claim (waiting up to ``wait`` seconds for work)."""
        return self.fleet.claim(agent, 1, wait=wait)

    def release_quietly(self, claim: Claim) -> None:
        """Give back what a cancelled call claimed, so it does not sit out its lease."""
        for lease in claim.leases:
            with contextlib.suppress(ShoalError):
                self.fleet.release(lease)


def _present(agent: Agent, now: float, timeout: float) -> bool:
    """Whether the fleet counts ``agent`` as someone's now: live, not offline, and heard
    from within ``timeout`` (heartbeat_timeout)."""
    gone = agent.status in (AgentStatus.OFFLINE, AgentStatus.TERMINATED)
    return not gone and now - agent.last_seen <= timeout


def _same(known: str, given: str) -> bool:
    """Whether two tokens are equal, in time that does not depend on where they differ
    (any text: ``compare_digest`` refuses non-ASCII ``str``)."""
    return hmac.compare_digest(known.encode(), given.encode("utf-8", "surrogatepass"))

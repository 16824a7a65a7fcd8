"""What an LLM agent reads when a shoal tool refuses: one table from error class to advice.

An MCP tool error (a result with ``isError``) goes back to the model, which decides what to
do next. So each message says what went wrong (shoal's own message, the same words the CLI
prints) and then what to do about it *in tool terms*: "call claim_best_task", not "run
`shoal claim`". The advice is chosen by the nearest class in ``ADVICE``, the way the CLI
picks its exit code from ``EXIT_CODES``; a core hint that names no CLI command is kept too,
since it is usually the most specific advice there is (e.g. how to write a priority).
"""

from __future__ import annotations

from shoal.errors import (
    BadInput,
    Conflict,
    DependencyCycle,
    FleetFull,
    InvalidPriority,
    InvalidTransition,
    LeaseLost,
    SchemaMismatch,
    ShoalError,
    StoreError,
    StoreNotFound,
    StoreUnavailable,
    UnknownAgent,
    UnknownTask,
)

__all__ = ["ADVICE", "ForeignAgent", "NoAgent", "NoToken", "describe"]


class ForeignAgent(BadInput):
    """This session acts as one agent; it cannot act as another."""

    code = "foreign_agent"


class NoAgent(BadInput):
    """This call needs an agent, and the session has none yet."""

    code = "no_agent"


class NoToken(BadInput):
    """This call needs the lease token of the task."""

    code = "no_token"


#: What to do next, by error class; the entry of the nearest class wins.
ADVICE: dict[type[ShoalError], str] = {
    ShoalError: "Check the arguments against the tool's description and call again.",
    BadInput: "Fix the arguments and call again; nothing was changed.",
    InvalidPriority: "Use a priority from 1 (most urgent) to 9, or critical, high, medium, low.",
    UnknownTask: "Check the task id with list_tasks or read_state; nothing was changed.",
    UnknownAgent: "Call register_agent first (read_state lists the agents); nothing was changed.",
    DependencyCycle: "Drop the dependency that leads back to this task.",
    ForeignAgent: "Leave out `agent` (it defaults to this session's agent), or use the same id.",
    NoAgent: "Call register_agent first, or pass `agent` with your agent id.",
    NoToken: "Pass the lease token that claim_best_task or wait_for_task returned.",
    Conflict: "Read the task with get_task to see its state, then decide; nothing was changed.",
    LeaseLost: "Stop working on this task and drop its result; call claim_best_task for new work.",
    FleetFull: "Do not start another agent now: wait for one to finish and terminate (see "
    "read_state), or ask the operator to raise max_agents.",
    InvalidTransition: "Read the task with get_task to see its state; nothing was changed.",
    StoreError: "The server cannot use its fleet; tell the operator (nothing was changed).",
    StoreNotFound: "The server's fleet does not exist; tell the operator to run `shoal init`.",
    SchemaMismatch: "The server's shoal and its fleet disagree on the schema; tell the operator.",
    StoreUnavailable: "The fleet is busy; nothing was changed. Call again in a moment.",
}


def describe(error: ShoalError) -> str:
    """The text of the tool error for ``error``: code, message, hint, and what to do next."""
    lines = [f"{error.code}: {error.message}"]
    if error.hint and "`shoal" not in error.hint:
        lines.append(f"hint: {error.hint}")
    lines.append(f"next: {_advice(error)}")
    return "\n".join(lines)


def _advice(error: ShoalError) -> str:
    for cls in type(error).__mro__:
        if cls in ADVICE:
            return ADVICE[cls]
    return ADVICE[ShoalError]

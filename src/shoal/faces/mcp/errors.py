"""What an LLM agent reads when a shoal tool refuses: one table from error class to advice.

An MCP tool error (a result with ``isError``) goes back to the model, which decides what to
do next. So each message says what went wrong (shoal's own message, the same words the CLI
prints) and then what to do about it *in tool terms*: "call claim_best_task", not "run
`shoal claim`". The advice is chosen by the nearest class in ``ADVICE``, the way the CLI
picks its exit code from ``EXIT_CODES``; a core hint that names no CLI command is kept too,
since it is usually the most specific advice there is (e.g. how to write a priority).

A few codes read differently over MCP than in the core, because a model acts on the code:
a lease that no longer holds is ``stale_lease`` (drop the work), and finishing a task that
is already done is ``already_done`` (nothing to redo). A server acting as one agent
(``--agent``) has no register tool, so its advice never sends the model to one.
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
    TooLarge,
    UnknownAgent,
    UnknownTask,
)

__all__ = [
    "ADVICE",
    "AlreadyDone",
    "ForeignAgent",
    "Internal",
    "NoAgent",
    "NoToken",
    "NotAManager",
    "NotYours",
    "UnknownTool",
    "code_of",
    "describe",
]


class ForeignAgent(BadInput):
    """This session acts as one agent; it cannot act as another."""

    code = "foreign_agent"


class NoAgent(BadInput):
    """This call needs an agent, and the session has none yet."""

    code = "no_agent"


class NoToken(BadInput):
    """This call needs the lease token of the task."""

    code = "no_token"


class NotAManager(BadInput):
    """Only a manager may do this: it acts on others' work or on the fleet itself."""

    code = "not_a_manager"


class NotYours(NotAManager):
    """A session that is no manager edits only the tasks its own agent posted."""

    code = "not_yours"


class AlreadyDone(Conflict):
    """The task is done already; finishing it again changes nothing."""

    code = "already_done"


class UnknownTool(BadInput):
    """There is no tool by that name."""

    code = "unknown_tool"


class Internal(ShoalError):
    """The server failed in a way it did not foresee (a bug, or a fault it cannot name)."""

    code = "internal_error"


#: MCP's name for a core code, where the model should read it differently. A payload or
#: body too large is arguments to fix like any other (the message says what is too large).
CODES: dict[str, str] = {LeaseLost.code: "stale_lease", TooLarge.code: "bad_input"}

#: What to do next, by error class; the entry of the nearest class wins.
ADVICE: dict[type[ShoalError], str] = {
    ShoalError: "Check the arguments against the tool's description and call again.",
    BadInput: "Fix the arguments and call again; nothing was changed.",
    InvalidPriority: "Use a priority from 1 (most urgent) to 9, or critical, high, medium, low.",
    TooLarge: "Put the large data in a file or at a URL and pass where it is instead; nothing "
    "was changed.",
    UnknownTask: "Check the task id with list_tasks or read_state; nothing was changed.",
    UnknownAgent: "Call register_agent first (read_state lists the agents); nothing was changed.",
    DependencyCycle: "Drop the dependency that leads back to this task.",
    ForeignAgent: "Leave out `agent` (it defaults to this session's agent), or use the same id.",
    NoAgent: "Call register_agent first, or pass `agent` with your agent id.",
    NoToken: "Pass the lease token that claim_best_task or wait_for_task returned.",
    NotAManager: "Leave it to a manager: work on your own tasks, and tell the operator if "
    "something needs one (a manager's server is `shoal mcp --agent ID --manager`); nothing "
    "was changed.",
    NotYours: "Edit only tasks you posted (get_task shows posted_by); leave others' tasks to "
    "a manager, or tell the operator; nothing was changed.",
    Conflict: "Read the task with get_task to see its state, then decide; nothing was changed.",
    LeaseLost: "Your lease ended (it expired, or the task was taken over): stop working on this "
    "task, drop its result, and call claim_best_task for new work.",
    AlreadyDone: "Nothing to redo: do not finish it again. Call claim_best_task for your next "
    "task.",
    FleetFull: "Do not work now. Ask the operator to raise the limit (`shoal config set "
    "max_agents N`) or to terminate an agent (read_state lists them), then call again.",
    InvalidTransition: "Read the task with get_task to see its state; nothing was changed.",
    StoreError: "The server cannot use its fleet; tell the operator (nothing was changed).",
    StoreNotFound: "The server's fleet does not exist; tell the operator to run `shoal init`.",
    SchemaMismatch: "The server's shoal and its fleet disagree on the schema; tell the operator.",
    StoreUnavailable: "The fleet is busy; nothing was changed. Call again in a moment.",
    UnknownTool: "Call one of the tools the server lists.",
    Internal: "Tell the operator (the server's log has the details); call again if it may pass.",
}

#: Advice for a server pinned to one agent (``--agent``), which has no register tool.
PINNED_ADVICE: dict[type[ShoalError], str] = {
    UnknownAgent: "This server's agent is gone (terminated). End this MCP session and start a "
    "new one to register it again.",
    FleetFull: "Do not work now. Ask the operator to raise the limit (`shoal config set "
    "max_agents N`) or to terminate an agent (read_state lists them); this server registers "
    "its agent again on your next call.",
}


def code_of(error: ShoalError) -> str:
    """The code a tool error carries for ``error``."""
    return CODES.get(error.code, error.code)


def describe(error: ShoalError, *, pinned: bool = False) -> str:
    """The text of the tool error for ``error``: code, message, hint, and what to do next.

    ``pinned``: the server acts as one agent (``--agent``), so the advice offers no
    register tool."""
    lines = [f"{code_of(error)}: {error.message}"]
    if error.hint and ("`shoal" not in error.hint or isinstance(error, FleetFull)):
        lines.append(f"hint: {error.hint}")
    lines.append(f"next: {_advice(error, pinned)}")
    return "\n".join(lines)


def _advice(error: ShoalError, pinned: bool) -> str:
    tables = (PINNED_ADVICE, ADVICE) if pinned else (ADVICE,)
    for cls in type(error).__mro__:
        for table in tables:
            if cls in table:
                return table[cls]
    return ADVICE[ShoalError]

"""Every error shoal raises, and what each one means to a caller.

::

    ShoalError                      anything shoal refuses or cannot do
     ├── BadInput                   the caller sent something wrong          exit 2
     │    ├── InvalidPriority
     │    ├── InvalidSetting
     │    ├── InvalidStoreURL
     │    ├── TooLarge              a payload or body past the fleet's cap   (HTTP 413)
     │    ├── UnknownTask
     │    ├── UnknownAgent
     │    ├── UnknownSchedule
     │    └── DependencyCycle
     ├── Conflict                   the fleet's state forbids it right now   exit 3
     │    ├── LeaseLost             the lease is stale, foreign or expired
     │    ├── FleetFull             max_agents live agents already
     │    ├── AgentInUse            another MCP session acts as that agent
     │    ├── KeyTaken              an idempotency key another poster's task holds
     │    └── InvalidTransition     e.g. cancel a finished task, retry a live one
     └── StoreError                 the store cannot be used (not a fleet)   exit 2
          ├── StoreNotFound         no fleet at that place                   exit 2
          ├── SchemaMismatch        the fleet's schema is older/newer        exit 2
          ├── StoreDamaged          the fleet's file is damaged or unsafe    exit 5
          └── StoreUnavailable      a passing fault; retrying may work       exit 4
               └── WriteConflict    two writers crossed; Fleet retries it    exit 4
    AddressUnavailable (a ShoalError)  a server cannot bind its address      exit 4

Each class's docstring is its default message. Every error carries a ``hint``: one sentence
on how to fix it, which the CLI prints under the message and MCP returns to the agent.
Driver errors (sqlite3, psycopg) never escape a store: they are translated into the most
specific class here, with the original kept as ``__cause__``.

Exit code 1 is not an error: it means "nothing to do" (a claim that found no work).
"""

from __future__ import annotations

__all__ = [
    "EXIT_CODES",
    "AddressUnavailable",
    "AgentInUse",
    "BadInput",
    "Conflict",
    "DependencyCycle",
    "FleetFull",
    "InvalidPriority",
    "InvalidSetting",
    "InvalidStoreURL",
    "InvalidTransition",
    "KeyTaken",
    "LeaseLost",
    "SchemaMismatch",
    "ShoalError",
    "StoreDamaged",
    "StoreError",
    "StoreNotFound",
    "StoreUnavailable",
    "TooLarge",
    "UnknownAgent",
    "UnknownSchedule",
    "UnknownTask",
    "WriteConflict",
    "exit_code_for",
]


class ShoalError(Exception):
    """shoal could not do that."""

    #: A short machine-readable name, stable across releases (for --json and MCP).
    code = "error"

    def __init__(self, message: str | None = None, *, hint: str | None = None) -> None:
        self.message = message or (self.__doc__ or self.code).strip()
        self.hint = hint
        super().__init__(self.message)

    def to_dict(self) -> dict[str, str | None]:
        """The error as data, for ``--json`` output and MCP tool errors."""
        return {"code": self.code, "message": self.message, "hint": self.hint}

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class BadInput(ShoalError):
    """The input was not valid."""

    code = "bad_input"


class InvalidPriority(BadInput):
    """Priority must be 1 (most urgent) to 9, or one of critical, high, medium, low."""

    code = "invalid_priority"


class InvalidSetting(BadInput):
    """That is not a valid fleet setting or value."""

    code = "invalid_setting"


class InvalidStoreURL(BadInput):
    """The store URL is not one shoal understands."""

    code = "invalid_store_url"


class TooLarge(BadInput):
    """That is larger than the fleet takes (its max_payload_bytes or max_body_bytes)."""

    code = "too_large"
    # Bad input like any other (exit 2; over MCP a ``bad_input``), told apart where a
    # protocol has its own word for it: HTTP answers 413, as it does to a body too large.


class UnknownTask(BadInput):
    """No task has that id."""

    code = "unknown_task"


class UnknownAgent(BadInput):
    """No live agent has that id."""

    code = "unknown_agent"


class UnknownSchedule(BadInput):
    """No schedule has that id."""

    code = "unknown_schedule"


class DependencyCycle(BadInput):
    """Those dependencies would form a cycle."""

    code = "dependency_cycle"


class Conflict(ShoalError):
    """The fleet's current state does not allow that."""

    code = "conflict"


class LeaseLost(Conflict):
    """The lease is no longer valid: the task was reclaimed, cancelled or finished."""

    code = "lease_lost"


class FleetFull(Conflict):
    """The fleet is at its max_agents limit."""

    code = "fleet_full"


class AgentInUse(Conflict):
    """Another session already acts as that agent; one agent is driven by one session."""

    code = "agent_in_use"


class KeyTaken(Conflict):
    """That idempotency key names a task someone else posted; a key gives back only the
    poster's own task."""

    code = "key_taken"


class InvalidTransition(Conflict):
    """The task is not in a state that allows that."""

    code = "invalid_transition"


class StoreError(ShoalError):
    """The store could not be used."""

    code = "store_error"


class StoreNotFound(StoreError):
    """There is no fleet at that place."""

    code = "store_not_found"


class SchemaMismatch(StoreError):
    """The fleet's schema does not match this version of shoal."""

    code = "schema_mismatch"


class StoreDamaged(StoreError):
    """The fleet's file is damaged or not safe to open (malformed, a link, or not shoal's);
    nothing was written to it."""

    code = "store_damaged"


class StoreUnavailable(StoreError):
    """The store did not answer; the call changed nothing and may be retried."""

    code = "store_unavailable"


class WriteConflict(StoreUnavailable):
    """Two writers of a shared store locked the same rows in opposite orders, and the store
    aborted one. Nothing was changed; ``Fleet`` runs the call again by itself."""

    code = "write_conflict"


class AddressUnavailable(ShoalError):
    """A server could not listen on that address (in use, or not this machine's); nothing
    was started."""

    code = "address_unavailable"


#: How each error ends a CLI command. The most specific class listed wins.
EXIT_CODES: dict[type[ShoalError], int] = {
    ShoalError: 2,
    BadInput: 2,
    StoreError: 2,  # retrying cannot help: point at a real fleet
    StoreUnavailable: 4,  # retryable: a passing fault
    StoreDamaged: 5,  # never retry: repair or restore the file
    AddressUnavailable: 4,  # retryable once the port is free
    Conflict: 3,
}


def exit_code_for(error: ShoalError) -> int:
    """The CLI exit code for ``error``: the entry of its nearest class in EXIT_CODES."""
    for cls in type(error).__mro__:
        if cls in EXIT_CODES:
            return EXIT_CODES[cls]
    return 2

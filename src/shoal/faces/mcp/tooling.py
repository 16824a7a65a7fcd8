"""How a Python function becomes one of shoal's MCP tools, and what the client is shown.

Three jobs, all about the SDK's edges rather than about the fleet:

- **Refusals are tool errors.** A shoal refusal becomes an ``isError`` result carrying the
  code, the message and what to do next (``errors.describe``); so do arguments the
  schema refuses or the tool does not take (the SDK would drop those silently), an unknown
  tool, and anything unforeseen (``internal_error``): a client never shows the SDK's bare
  "Error executing tool".
- **Sessions.** Each call is tied to its client connection's ``Session`` (``session_of``),
  and the session's end -- however the SDK ends the connection -- ends it on the desk.
- **A short tool list.** The list sits in the model's context window, so a server pinned
  to one agent drops the ``agent`` parameter (and the register tool), no output schemas
  are listed (see ``ShoalServer``), and input schemas are slimmed: no generated titles,
  ``T | None`` as a type list, no null defaults -- accepting exactly what they did before.
- **Managers' tools for managers.** A server whose sessions are not a manager's
  (``FleetDesk.manager``) does not list them, and a call to one is refused
  (``not_a_manager``) before anything runs.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult, TextContent, Tool, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from shoal._log import get_logger
from shoal.errors import BadInput, ShoalError
from shoal.faces.mcp.errors import ForeignAgent, Internal, NotAManager, UnknownTool, describe
from shoal.faces.mcp.sessions import FleetDesk, Session

__all__ = [
    "STDIO",
    "AgentArg",
    "ShoalServer",
    "TaskIdArg",
    "TokenArg",
    "Toolbox",
    "refusal",
    "session_of",
    "slim_schema",
]

F = TypeVar("F", bound=Callable[..., Any])

log = get_logger("shoal.mcp")

_SESSION_KEY = "shoal.session"
#: The name of a session that is not an HTTP one (stdio, or a client in the same process).
STDIO = "stdio"


# ---------------------------------------------------------------------- sessions


def _connection(ctx: Context) -> Connection | None:
    """The SDK's per-client ``Connection`` of a call: its ``state`` lasts as long as the
    client's connection, and its ``exit_stack`` is unwound when the connection ends (stdio
    EOF, HTTP DELETE, the HTTP idle timeout, server shutdown) -- the SDK's place for
    per-connection cleanup. MCPServer's ``Context`` does not expose it (SDK 2.3), so it is
    read off the request's session; None if a later SDK moves it (then HTTP calls are
    served as stateless ones)."""
    found = getattr(ctx.request_context.session, "_connection", None)
    return found if isinstance(found, Connection) else None


def session_of(ctx: Context, desk: FleetDesk) -> Session | None:
    """The ``Session`` a call belongs to, opened on first use, or None for a stateless
    HTTP request (which names its agent in each call).

    Over stdio (a request with no HTTP headers) the client is the process's, so the
    session is the process's: one for every connection, ended when the server stops. The
    SDK's per-request protocol (``mcp.Client``'s default mode from 2026) makes each call
    a connection of its own, and a session per connection would give a claim back at the
    end of the very call that made it. Over HTTP the session is the ``mcp-session-id``'s.

    Must first be called on the event loop (the session's end is hooked to the
    connection's exit stack); ``Toolbox`` does so before a tool runs."""
    if ctx.headers is None:
        return desk.lasting_session(STDIO)
    connection = _connection(ctx)
    if connection is None or connection.session_id is None:
        return None
    session = connection.state.get(_SESSION_KEY)
    if isinstance(session, Session):
        return session
    session = desk.open_session(connection.session_id)
    connection.state[_SESSION_KEY] = session

    async def end() -> None:
        await anyio.to_thread.run_sync(desk.end_session, session)

    connection.exit_stack.push_async_callback(end)
    return session


# ---------------------------------------------------------------------- the tool list


def slim_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` as a client is shown it: the same constraints in fewer characters."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "title" or (key == "default" and value is None):
            continue
        if key in ("properties", "$defs") and isinstance(value, dict):
            out[key] = {name: slim_schema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = slim_schema(value)
        elif key in ("anyOf", "oneOf", "allOf") and isinstance(value, list):
            out[key] = [slim_schema(sub) for sub in value]
        else:
            out[key] = value
    return _nullable_as_type_list(out)


def _nullable_as_type_list(schema: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [{"type": T, ...}, {"type": "null"}]}`` -> ``{"type": [T, "null"], ...}``
    (only when the other branch is a plain type, so nothing is lost)."""
    options = schema.get("anyOf")
    if not isinstance(options, list) or len(options) != 2 or {"type": "null"} not in options:
        return schema
    (other,) = [o for o in options if o != {"type": "null"}]
    if not isinstance(other.get("type"), str) or set(other) - {"type", "items"}:
        return schema
    merged = {k: v for k, v in schema.items() if k != "anyOf"}
    return {**other, "type": [other["type"], "null"], **merged}


class ShoalServer(MCPServer):
    """An MCPServer that lists its tools briefly and words every failure itself.

    The list has slim input schemas and no output schemas: the results are typed models
    (``models``), checked against their schemas by the server and sent as
    ``structuredContent`` with a JSON text copy; listing those schemas too would more than
    double the list, which a model carries in its context all along.

    Failures the SDK catches itself (arguments that fail the schema, an unknown tool, a
    result it cannot convert) come back as tool errors in shoal's shape (code, message,
    what to do next) instead of the SDK's "Error executing tool ..." text.
    """

    def __init__(self, desk: FleetDesk, **settings: Any) -> None:
        super().__init__(**settings)
        self.desk = desk
        self._arguments: dict[str, set[str]] = {}  # each tool's argument names
        self.withheld: set[str] = set()  # managers' tools this server does not offer

    async def list_tools(self) -> list[Tool]:
        tools = await super().list_tools()
        return [
            tool.model_copy(
                update={"input_schema": slim_schema(tool.input_schema), "output_schema": None}
            )
            for tool in tools
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            if name in self.withheld:
                raise _not_a_manager(f"{name} acts on others' work or on the fleet", self.desk)
            arguments = await self._checked(name, arguments)
            return await super().call_tool(name, arguments, context)
        except ShoalError as exc:
            return refusal(exc, self.desk)
        except MCPError:
            raise
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError):
                log.error("shoal mcp: %s failed", name, exc_info=exc.__cause__ or exc)
            return refusal(_sdk_refusal(name, exc, self.desk), self.desk)

    async def _checked(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` without surprises: one the tool does not take is refused (the SDK
        would drop it silently), except an ``agent`` naming the agent a pinned server acts
        as anyway. Another agent is refused (``foreign_agent``)."""
        if not self._arguments:
            for tool in await super().list_tools():
                self._arguments[tool.name] = set(tool.input_schema.get("properties", {}))
        known = self._arguments.get(name)
        if known is None:
            return arguments  # the SDK says it is unknown
        if name == "register_agent" and "manager" in arguments:
            if arguments["manager"] not in (False, None):
                raise _not_a_manager("a session cannot make its agent a manager", self.desk)
            arguments = {k: v for k, v in arguments.items() if k != "manager"}
        fixed = self.desk.fixed
        if fixed is not None and "agent" in arguments and "agent" not in known:
            if arguments["agent"] != fixed:
                raise ForeignAgent(
                    f"this server acts as agent {fixed!r} (shoal mcp --agent {fixed}); it "
                    f"cannot act as {arguments['agent']!r}"
                )
            arguments = {k: v for k, v in arguments.items() if k != "agent"}
        extra = sorted(set(arguments) - known)
        if extra:
            takes = ", ".join(sorted(known)) or "no arguments"
            raise BadInput(f"{name} takes no {', '.join(extra)} (it takes {takes})")
        return arguments


def _not_a_manager(what: str, desk: FleetDesk) -> NotAManager:
    """The refusal of a manager's act to a session that is not a manager's."""
    who = f"agent {desk.fixed!r} is not a manager" if desk.fixed else "no session is a manager"
    return NotAManager(
        f"{what}: a manager's, and on this server {who}; nothing was changed",
        hint="managers are made by the operator only: a server started with --agent ID --manager",
    )


def refusal(error: ShoalError, desk: FleetDesk) -> CallToolResult:
    """A tool error result for ``error``, in shoal's words (``errors.describe``)."""
    text = describe(error, pinned=desk.pinned)
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


#: Tools of earlier versions, and what took their place.
RENAMED = {"register_node": "register_agent"}


def _sdk_refusal(name: str, exc: ToolError, desk: FleetDesk) -> ShoalError:
    """The shoal error for a failure the SDK caught before (or after) the tool ran."""
    cause = exc.__cause__
    if isinstance(cause, ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(part) for part in err['loc']) or 'arguments'}: {err['msg']}"
            for err in cause.errors()
        )
        return BadInput(f"{name}: {problems}")
    if isinstance(exc, UnexpectedToolError):
        return Internal(f"{name} failed on the server")
    if str(exc).startswith("Unknown tool"):
        if name.startswith("register") and desk.fixed is not None:
            return UnknownTool(
                f"there is no tool {name}: this server registered you as agent {desk.fixed} already"
            )
        instead = f" (it is called {RENAMED[name]} now)" if name in RENAMED else ""
        return UnknownTool(f"there is no tool {name}{instead}")
    return BadInput(str(exc).removeprefix(f"Error executing tool {name}: "))


# ---------------------------------------------------------------------- tools


class Toolbox:
    """Registers shoal's tool functions on a server, the same way for all of them.

    A tool function takes ``ctx: Context`` first and, if it acts as an agent, ``agent:
    AgentArg`` last; it may be synchronous (it then runs in a worker thread, as the SDK
    would run it).
    """

    def __init__(self, server: ShoalServer, desk: FleetDesk) -> None:
        self.server = server
        self.desk = desk

    def tool(
        self,
        *,
        read_only: bool = False,
        idempotent: bool = False,
        destructive: bool = False,
        unpinned_only: bool = False,
        manager_only: bool = False,
    ) -> Callable[[F], F]:
        """Register the decorated function as a tool named after it; its docstring is the
        description. ``unpinned_only``: not offered by a server pinned to one agent.
        ``manager_only``: offered only where sessions are a manager's (``FleetDesk.manager``);
        elsewhere a call to it is refused (``not_a_manager``)."""

        def register(fn: F) -> F:
            if unpinned_only and self.desk.pinned:
                return fn
            if manager_only and not self.desk.manager:
                self.server.withheld.add(fn.__name__)
                return fn
            hints = ToolAnnotations(
                read_only_hint=True if read_only else None,
                destructive_hint=None if read_only or destructive else False,
                idempotent_hint=True if idempotent and not read_only else None,
                open_world_hint=False,
            )
            self.server.add_tool(
                self._wrap(fn),
                name=fn.__name__,
                description=" ".join((fn.__doc__ or "").split()),
                annotations=hints,
            )
            return fn

        return register

    def _wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` as the SDK should call it: session first, refusals as tool errors, and
        (pinned) without its ``agent`` parameter."""
        desk = self.desk
        is_async = inspect.iscoroutinefunction(fn)
        signature = inspect.signature(fn, eval_str=True)
        if desk.pinned:  # the agent it acts as is the server's: no parameter for it
            kept = [p for p in signature.parameters.values() if p.annotation is not AgentArg]
            signature = signature.replace(parameters=kept)

        async def run(**kwargs: Any) -> Any:
            ctx = kwargs.get("ctx")
            try:
                session = session_of(ctx, desk) if isinstance(ctx, Context) else None
                with desk.calling(session) if session else contextlib.nullcontext():
                    if is_async:
                        return compact(await fn(**kwargs))
                    return compact(await anyio.to_thread.run_sync(lambda: fn(**kwargs)))
            except (ToolError, MCPError):
                raise
            except ShoalError as exc:
                return refusal(exc, desk)
            except Exception as exc:
                log.exception("shoal mcp: %s failed", fn.__name__)
                return refusal(Internal(f"{fn.__name__} failed: {type(exc).__name__}: {exc}"), desk)

        run.__name__ = fn.__name__
        run.__qualname__ = fn.__qualname__
        run.__doc__ = fn.__doc__
        run.__signature__ = signature  # type: ignore[attr-defined]
        run.__annotations__ = {
            **{name: p.annotation for name, p in signature.parameters.items()},
            "return": signature.return_annotation,
        }
        return run


def compact(result: Any) -> Any:
    """A model result as the client gets it: ``structuredContent``, and the same JSON on
    one line as its text (the SDK would indent it: the same data twice over in a model's
    context window, the second copy half whitespace). Anything else (a result the tool
    made itself, a plain value) is left to the SDK."""
    if not isinstance(result, BaseModel) or isinstance(
        result, CallToolResult | InputRequiredResult
    ):
        return result
    data = result.model_dump(mode="json", by_alias=True)
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)


# ---------------------------------------------------------------------- argument types

AgentArg = Annotated[
    str | None, Field(description="Your agent id; defaults to the one this session registered.")
]
TaskIdArg = Annotated[int, Field(description="The task's id.")]
TokenArg = Annotated[
    str | None,
    Field(description="The lease token; may be left out for a task your session's agent holds."),
]

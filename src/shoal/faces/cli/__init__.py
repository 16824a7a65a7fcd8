"""The ``shoal`` command line: one module per command group, around one shared context.

* ``root`` -- the ``shoal`` group, its global options and ``main``: shoal errors become a
  message, a hint and a documented exit code.
* ``fast`` -- the agent loop's everyday calls (``claim``, ``done``, ``status``, ``list``) read
  without click, run by the same bodies (``loop``), so that they never import it;
  ``context`` -- the ``App`` and the exit codes, which need no click either.
* ``app`` -- what every command shares: the ``App`` (store, output mode, open fleet) and the
  options declared once for all commands (``--store``, ``--json``/``--format``, ``--agent``,
  ``--token``, TASK_ID).
* ``tasks`` (add, list, show, ready, cancel, retry), ``imports`` (import), ``leases`` (claim,
  done, fail, release, defer, heartbeat), ``agents`` (register, agents, agent, set-status),
  ``hub`` (init, status, assess, rebalance, reap, events, config), ``prune``, ``doctor``, ``prime``,
  ``mcp`` (the ``shoal mcp`` group), ``runtime`` (worker, monitor, supervise), ``demo``,
  ``sim``: the commands, as ``shoal --help`` and the README group them.
* ``live``, ``watch``, ``logs``: terminal views and logging, for the commands only.

What the CLI shares with the other faces (rendering, output shapes, posting, importing) is
in ``shoal.faces`` itself, so the MCP server (and a later web face) never imports click.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from shoal.faces.cli.root import cli

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> NoReturn:
    """The ``shoal`` command: the agent loop's everyday calls run without click (``fast``),
    every other call through the click group (``root.main``)."""
    from shoal.faces.cli import fast

    args = list(sys.argv[1:] if argv is None else argv)
    fast.run(args)  # returns only if the call is not one of its own
    from shoal.faces.cli.root import main as with_click

    with_click(args)


def __getattr__(name: str) -> Any:
    """``cli`` (the click group), imported when asked for: ``main`` may not need click."""
    if name == "cli":
        from shoal.faces.cli.root import cli

        return cli
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

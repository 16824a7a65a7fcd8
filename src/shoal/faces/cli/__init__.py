"""The ``shoal`` command line: one module per command group, around one shared context.

* ``root`` -- the ``shoal`` group, its global options and ``main`` (the entry point): shoal
  errors become a message, a hint and a documented exit code.
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

from shoal.faces.cli.root import cli, main

__all__ = ["cli", "main"]

"""Onboarding an agent: ``shoal prime`` (a briefing for a coding agent, or with
``--agents-md`` a snippet for AGENTS.md/CLAUDE.md); ``shoal mcp config`` (the JSON that
registers ``shoal mcp`` with Claude, Cursor or VS Code) is in ``mcp_config``, and its names
are re-exported here.

``root.py`` registers them: ``add_prime_commands(cli)`` adds ``prime``, and
``mcp_config_command`` is the ``config`` subcommand of the ``mcp`` group (mcp.py). They use
only what every command shares, the ``App`` (its ``store`` and ``json``).

The texts name real commands, flags and MCP tools; ``tests/faces/test_prime.py`` parses every
``shoal ...`` line and every ``tool(...)`` call in them against the real CLI and server, so
a renamed flag or tool fails a test instead of misleading an agent.
"""

from __future__ import annotations

import json

import click

from shoal.faces.cli.app import App, json_flag, pass_app
from shoal.faces.cli.mcp_config import CLIENTS, mcp_config, mcp_config_command

__all__ = [
    "AGENTS_MD",
    "BRIEFING",
    "CLIENTS",
    "add_prime_commands",
    "mcp_config",
    "mcp_config_command",
    "prime",
]

BRIEFING = """\
shoal: a work-stealing task coordinator for a fleet of agents. You are one of the agents:
you claim the best task you can do under a lease, do it, and report how it went. Nobody
else works on a task while you hold its lease; if you go silent, the lease runs out and
the task goes back to the others. Placeholders are in capitals, defaults in parentheses.

The loop, from a shell (every command also takes --json):
  shoal register AGENT --skill python --domain code   # once; pick an id of your own
  shoal claim --agent AGENT --json                    # read .task.id and .lease.token
      .task.title, .task.body and .task.payload say what to do. Exit 1: nothing to do
      (.reason: empty, busy or paused); add --wait 60 to wait for work.
  (do the work)
  shoal heartbeat AGENT                               # during long work, every minute or so
  shoal done ID --token TOKEN --result '{"ok": true}' # a result: JSON, text or @file
  shoal fail ID --token TOKEN --error 'what went wrong'   # retried after a backoff
  shoal release ID --token TOKEN                      # give it back untouched
  Then claim the next one. In a shell script, instead of reading the JSON:
  eval "$(shoal claim --agent AGENT --format env)"   # exports the agent, task and lease;
  after it, heartbeat, done, fail and release need no AGENT, ID or --token.

Exit codes: 0 ok; 1 nothing to do; 2 bad input (fix the command: see its --help);
3 lease lost or conflict (the task is not yours any more); 4 store unavailable (nothing
changed: run the same command again); 5 store damaged (do not retry: tell a person, who
runs `shoal doctor`). With --json an error is
{"error": {"code": ..., "message": ..., "hint": ...}}: the hint says what to do next.

The same loop over MCP (when the `shoal mcp` server is connected):
  register_agent(agent, skills, domains)    once; absent when the server has --agent
  claim_best_task()                         the task and its lease; claimed=false has
                                            reason and next_step
  wait_for_task(timeout_seconds)            blocks until work arrives, then claims it
  heartbeat()                               during long work
  complete_task(task_id, result)            done; claim_next=true also claims the next
  fail_task(task_id, error)                 retried after a backoff
  release_task(task_id)                     give it back untouched
  The server keeps your lease tokens. A refusal starts with a code (stale_lease,
  already_done, unknown_task...) and changes nothing. When the session ends, your agent
  leaves the fleet and the tasks you hold go back.

Rules that matter:
- A lease lasts lease_ttl (600 s; `shoal config get lease_ttl` shows this fleet's).
  A heartbeat extends every lease you hold; an agent silent for heartbeat_timeout (90 s)
  is offline and its queue goes back to the pool. So heartbeat during long work.
- Lease lost (exit 3 from the CLI, stale_lease over MCP): stop working on that task at
  once and drop its results; someone else has it now. Claim again.
- Cannot or should not do it (wrong skills, blocked)? release it: no attempt is counted.
  Tried and failed? fail it with a useful error: it is retried after a backoff until
  max_attempts (3) runs out, then it is dead (--no-retry: dead at once).
- The circuit breaker pauses an agent that fails failure_streak (5) tasks in a row: its
  claims exit 1 with reason paused for pause_cooldown (600 s) or until a person runs
  `shoal agent resume AGENT`. Fix the cause instead of failing the backlog away.
- Only finish tasks you claimed, with their own token. New work found on the way:
  `shoal add TITLE --parent ID --skill SKILL` (add_task(title, parent) over MCP).
- Leaving for good: `shoal set-status AGENT terminated` (set_agent_status(status) over MCP).
"""

AGENTS_MD = """\
## Work comes from shoal

This project hands out work through shoal, a task coordinator for a fleet of agents. Take
tasks from it; do not pick work on your own. Placeholders are in capitals.

1. Once per session: `shoal register AGENT --skill SKILL`, with an AGENT id of your own.
2. `shoal claim --agent AGENT --json`: read `.task.id`, `.lease.token` and what to do in
   `.task.title`, `.task.body` and `.task.payload`. Exit 1 means nothing to do (`.reason`
   says why); stop, or wait with `shoal claim --agent AGENT --wait 60 --json`.
3. Do the work. If it takes long, run `shoal heartbeat AGENT` every minute or so: the lease
   lasts `lease_ttl` (10 minutes by default), and an expired lease hands the task to others.
4. Report it:
   - done: `shoal done ID --token TOKEN --result 'what you did'`
   - failed: `shoal fail ID --token TOKEN --error 'what went wrong'` (retried after a backoff)
   - giving up without trying: `shoal release ID --token TOKEN` (no attempt counted)
5. Exit 3 (lease lost): the task is no longer yours; drop that work and claim again.
   Exit 4: the store was unavailable; run the same command again. Exit 2: fix the command.
   Exit 5: the store is damaged; stop and tell a person (`shoal doctor` says what to do).
6. Failing task after task pauses you (the circuit breaker: claims exit 1, reason
   `paused`); say so to a person instead of retrying.

Over MCP (a `shoal` server connected): the same loop with `register_agent(agent, skills)`,
`claim_best_task()` or `wait_for_task(timeout_seconds)`, `heartbeat()`,
`complete_task(task_id, result)`, `fail_task(task_id, error)` and `release_task(task_id)`;
a refusal starting with `stale_lease` means drop the work. `shoal prime` prints the full
briefing.
"""


@click.command(short_help="A briefing for a coding agent joining the fleet.")
@click.option(
    "--agents-md",
    is_flag=True,
    help="Print a snippet to paste into AGENTS.md or CLAUDE.md (markdown) instead.",
)
@json_flag('Print {"briefing": TEXT}.')
@pass_app
def prime(app: App, agents_md: bool) -> None:
    """Print a short briefing for a coding agent: what shoal is, the claim -> work -> done
    loop from the shell and over MCP, exit codes, and the rules that matter.

    \b
    Examples:
      shoal prime                   # paste it into the agent's prompt
      shoal prime --agents-md >> AGENTS.md
    """
    text = AGENTS_MD if agents_md else BRIEFING
    if app.json:
        click.echo(json.dumps({"briefing": text}, indent=2))
    else:
        click.echo(text, nl=False)


def add_prime_commands(group: click.Group) -> None:
    """Register ``shoal prime`` on ``group``."""
    group.add_command(prime)

"""Capture what shoal's faces say, to compare two trees for a change that must not change
behaviour (a refactor): run it on the tree before and on the tree after, then ``diff -r``.

It records, each in its own file under the output folder:

- every CLI command's ``--help`` (and each subcommand's), walked from the click group;
- a fixed scenario through the real ``shoal`` script on a fresh SQLite fleet -- init,
  register, add, list, show, claim, done, fail, release, status, events, and the refusals
  (bad priority, unknown agent, stale token...) -- each with its exit code and both streams;
- the MCP tool list with every input and output schema, for an agent's server and a
  manager's, through the MCP SDK's own client over stdio, and a few tool calls;
- ``shoal sim --seeds 10 --json``, its wall-clock seconds taken out.

What changes from run to run whatever the code -- times, lease tokens, the temporary
folder -- is replaced by a placeholder, so two captures of the same behaviour are equal.

    python bench/capture_faces.py OUT_DIR [help|scenario|mcp|sim ...]  # the tree's venv
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import click

SCRIPT = Path(sys.executable).with_name("shoal")
ENV_NAMES = ("SHOAL_STORE", "SHOAL_AGENT", "SHOAL_TOKEN")

_ISO = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d(\.\d+)?)?(Z|[+-]\d\d:?\d\d)?")
_EPOCH = re.compile(r"\b1[6-9]\d{8}(\.\d+)?\b")
_TOKEN = re.compile(r"\b[0-9a-f]{16}\b")
_AGO = re.compile(r"\b\d+(\.\d+)?\s?(ms|s|m|h|d|sec|secs|seconds|minutes?)\b( ago)?")
_WALL = re.compile(r'"(wall|elapsed|seconds|wall_seconds|duration_s|expires_in_s)":\s*[0-9.e-]+')


def normal(text: str, tmp: str) -> str:
    """``text`` with what varies between runs of the same code replaced by placeholders."""
    text = text.replace(tmp, "<TMP>")
    text = _WALL.sub(r'"\1": <WALL>', text)  # first: a float's digits are no token
    text = _ISO.sub("<TIME>", text)
    text = _EPOCH.sub("<EPOCH>", text)
    text = _TOKEN.sub("<TOKEN>", text)
    return _AGO.sub("<AGO>", text)


def env_for(store: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update(COLUMNS="200", NO_COLOR="1", SHOAL_STORE=store, TERM="dumb")
    return env


def run(args: list[str], env: dict[str, str], cwd: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [str(SCRIPT), *args],
        check=False,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    return done.returncode, done.stdout, done.stderr


def commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path under ``group``, the group itself first."""
    found = [prefix]
    ctx = click.Context(group)
    for name in sorted(group.list_commands(ctx)):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            found += commands(command, (*prefix, name))
        elif command is not None:
            found.append((*prefix, name))
    return found


def capture_help(out: Path, env: dict[str, str], cwd: str, tmp: str) -> None:
    from shoal.faces.cli.root import cli

    lines = []
    for path in commands(cli):
        code, stdout, stderr = run([*path, "--help"], env, cwd)
        lines.append(f"$ shoal {' '.join(path)} --help  -> {code}\n{stdout}{stderr}")
    (out / "help.txt").write_text(normal("\n".join(lines), tmp))


SCENARIO: list[list[str]] = [
    ["init", "--json"],
    ["register", "ada", "--skill", "python", "--json"],
    ["register", "bob", "--domain", "web", "--json"],
    ["add", "fix the parser", "--skill", "python", "-p", "high", "--json"],
    ["add", "write docs", "--body", "<b>untrusted</b>", "--json"],
    ["add", "third", "--to", "bob", "--json"],
    ["add", "bad", "-p", "bogus"],
    ["add", "", "--json"],
    ["list", "--json"],
    ["list"],
    ["list", "--format", "tsv"],
    ["show", "1", "--json"],
    ["show", "2"],
    ["show", "999"],
    ["ready", "--json"],
    ["ready", "--agent", "ada", "--json"],
    ["claim", "--agent", "nobody", "--json"],
    ["claim", "--agent", "ada", "--format", "env"],
    ["claim", "--agent", "ada", "--json"],
    ["claim", "--agent", "bob", "--json"],
    ["done", "1", "--token", "0000000000000000"],
    ["done", "1", "--token", "{ada1}", "--result", '{"ok": true}', "--json"],
    ["done", "1", "--token", "{ada1}", "--json"],
    ["claim", "--agent", "ada", "--json"],
    ["fail", "{ada2.id}", "--token", "{ada2}", "--error", "boom", "--no-retry", "--json"],
    ["release", "{bob1.id}", "--token", "{bob1}", "--json"],
    ["agents", "--json"],
    ["status", "--json"],
    ["status"],
    ["assess", "--json"],
    ["reap", "--json"],
    ["rebalance", "--json"],
    ["events", "--json"],
    ["config", "get", "--json"],
    ["config", "set", "max_agents=zero"],
    ["cancel", "3", "--json"],
    ["retry", "3", "--json"],
    ["set-priority", "3", "low", "--json"],
    ["heartbeat", "--agent", "ada", "--json"],
    ["agent", "pause", "bob", "--json"],
    ["claim", "--agent", "bob", "--json"],
    ["agent", "resume", "bob", "--json"],
    ["list", "--state", "nonsense"],
]


def capture_scenario(out: Path, env: dict[str, str], cwd: str, tmp: str) -> None:
    tokens: dict[str, str] = {}
    ids: dict[str, str] = {}
    counts: dict[str, int] = {}
    lines = []
    for args in SCENARIO:
        filled = []
        for given in args:
            arg = given
            for name, token in tokens.items():
                arg = arg.replace("{" + name + "}", token)
            for name, task in ids.items():
                arg = arg.replace("{" + name + ".id}", task)
            filled.append(arg)
        code, stdout, stderr = run(filled, env, cwd)
        lines.append(f"$ shoal {' '.join(args)}  -> {code}\n{stdout}{stderr}")
        if args[0] == "claim" and "--json" in args and code == 0:
            agent = args[args.index("--agent") + 1]
            for grant in json.loads(stdout).get("claimed", []):
                counts[agent] = counts.get(agent, 0) + 1
                key = f"{agent}{counts[agent]}"
                tokens[key] = grant["lease"]["token"]
                ids[key] = str(grant["task"]["id"])
        if args[0] == "claim" and "env" in args and code == 0:
            agent = args[args.index("--agent") + 1]
            values = dict(
                line.removeprefix("export ").split("=", 1)
                for line in stdout.splitlines()
                if "=" in line
            )
            counts[agent] = counts.get(agent, 0) + 1
            key = f"{agent}{counts[agent]}"
            tokens[key] = values.get("SHOAL_LEASE", "").strip("'\"")
            ids[key] = values.get("SHOAL_TASK", "").strip("'\"")
    (out / "scenario.txt").write_text(normal("\n".join(lines), tmp))


async def capture_mcp(out: Path, env: dict[str, str], cwd: str, tmp: str) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    result: dict[str, Any] = {}
    for label, args in (
        ("agent", ["--agent", "cat"]),
        ("manager", ["--agent", "boss", "--manager"]),
    ):
        params = StdioServerParameters(command=str(SCRIPT), args=["mcp", *args], env=env, cwd=cwd)
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            listed = await session.list_tools()
            tools = [tool.model_dump(mode="json", exclude_none=True) for tool in listed.tools]
            calls = []
            plan: list[tuple[str, dict[str, Any]]] = [
                ("add_task", {"title": "from mcp", "priority": "high"}),
                ("add_task", {"title": "bad", "priority": "bogus"}),
                ("claim_best_task", {}),
                ("read_state", {}),
                ("get_task", {"task_id": 999}),
                ("complete_task", {"task_id": 1, "token": "0000000000000000"}),
            ]
            for tool, arguments in plan:
                answer = await session.call_tool(tool, arguments)
                calls.append(
                    {
                        "tool": tool,
                        "arguments": arguments,
                        "is_error": answer.is_error,
                        "structured": answer.structured_content,
                        "text": [getattr(block, "text", "") for block in answer.content],
                    }
                )
            result[label] = {
                "instructions": init.instructions,
                "tools": sorted(tools, key=lambda tool: tool["name"]),
                "calls": calls,
            }
    text = json.dumps(result, indent=1, sort_keys=True, default=str)
    (out / "mcp.json").write_text(normal(text, tmp))


def capture_sim(out: Path, env: dict[str, str], cwd: str, tmp: str) -> None:
    code, stdout, stderr = run(["sim", "--seeds", "10", "--json"], env, cwd)
    (out / "sim.txt").write_text(normal(f"-> {code}\n{stdout}{stderr}", tmp))


def main() -> None:
    out = Path(sys.argv[1])
    only = set(sys.argv[2:]) or {"help", "scenario", "mcp", "sim"}
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="shoal-capture-") as tmp:
        env = env_for(f"sqlite:///{tmp}/fleet.db")
        if "help" in only:
            capture_help(out, env, tmp, tmp)
        if "scenario" in only:
            capture_scenario(out, env, tmp, tmp)
    with tempfile.TemporaryDirectory(prefix="shoal-capture-") as tmp:
        env = env_for(f"sqlite:///{tmp}/fleet.db")
        run(["init"], env, tmp)
        if "mcp" in only:
            asyncio.run(capture_mcp(out, env, tmp, tmp))
    with tempfile.TemporaryDirectory(prefix="shoal-capture-") as tmp:
        if "sim" in only:
            capture_sim(out, env_for(f"sqlite:///{tmp}/fleet.db"), tmp, tmp)
    print(f"captured in {out}")


if __name__ == "__main__":
    main()

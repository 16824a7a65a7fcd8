"""``shoal mcp config``: the JSON that registers ``shoal mcp`` with Claude, Cursor or VS Code.

A client's MCP configuration is a file projects often commit (``.mcp.json``,
``.vscode/mcp.json``), so it is written with no secret in it unless asked
(``--include-secrets``). Where a secret is needed, the config names where it comes from:

- **over stdio** the server is started with the fleet's URL in ``SHOAL_STORE``; a password
  in that URL is left out, and the config passes the client's ``PGPASSWORD`` on instead
  (libpq reads it, or ``~/.pgpass``, a file only its owner may read); a token in a git
  URL is left out too (a credential helper or an SSH key does its job);
- **over HTTP** (``--transport http``) the client sends ``Authorization: Bearer`` with the
  server's token taken from its environment (``SHOAL_MCP_TOKEN``; VS Code asks once and
  keeps it in its secret storage). The token is the one the server was given
  (``--token-file``) or, on loopback, the one it made in a file only its user can read
  (``shoal.local_secrets.mcp_token_file``).

What was left out, and where the client should find it, is said on stderr; stdout holds
only the JSON.

The config must work when pasted: the command is the absolute path of the shoal that wrote
it (a client started without the user's PATH fails on a bare ``shoal``), and where the
``mcp`` extra is missing no config is written at all (exit 2, with the install line): the
server it named would exit at once.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import click

from shoal import local_secrets
from shoal.errors import BadInput, StoreNotFound
from shoal.extras import install_hint, missing_extra
from shoal.faces.cli.app import App, agent_option, json_flag, pass_app
from shoal.faces.exposure import TOKEN_ENV, check_port, is_loopback, read_token
from shoal.fleet import Fleet
from shoal.text import shown_url

__all__ = [
    "CLIENTS",
    "mcp_config",
    "mcp_config_command",
    "mcp_http_config",
    "without_secrets",
]

#: The MCP clients ``shoal mcp config`` writes for, and where their config lives.
CLIENTS: dict[str, str] = {
    "claude": ".mcp.json (Claude Code, project scope) or claude_desktop_config.json "
    "(Claude Desktop), under mcpServers",
    "cursor": ".cursor/mcp.json (or ~/.cursor/mcp.json), under mcpServers",
    "vscode": ".vscode/mcp.json, under servers",
}

#: How each client writes "the value of this environment variable" in its config (Claude's
#: with an empty default: an unset variable would be passed on as its own name).
_FROM_ENV = {"claude": "${{{}:-}}", "cursor": "${{env:{}}}", "vscode": "${{env:{}}}"}
#: How Claude and Cursor write "Bearer <the client's $SHOAL_MCP_TOKEN>".
_BEARER_FROM_ENV = {"claude": f"Bearer ${{{TOKEN_ENV}}}", "cursor": f"Bearer ${{env:{TOKEN_ENV}}}"}
#: VS Code asks for the bearer token once and keeps it in its secret storage.
_VSCODE_INPUT = "shoal-mcp-token"


def _server_command() -> list[str]:
    """How the client should start this very shoal, by absolute path: a client is often
    started without the user's PATH (``spawn shoal ENOENT``), and another ``shoal`` on it
    may be another version. The script that is running (``sys.argv[0]``), else the one
    beside this Python (a venv's ``bin/shoal``), else the one on the PATH, else this Python
    running the CLI's module; never a bare name."""
    ran = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if ran is not None and ran.stem == "shoal" and ran.is_file():
        return [os.path.abspath(ran)]  # not resolved: a pipx link outlives a reinstall
    beside = Path(sys.executable).with_name("shoal")
    if beside.is_file():
        return [os.path.abspath(beside)]
    found = shutil.which("shoal")
    if found:
        return [os.path.abspath(found)]
    return [os.path.abspath(sys.executable), "-m", "shoal.faces.cli"]


def _check_extra() -> None:
    """Refuse to write a config for a server that would exit at once: ``shoal mcp`` needs
    the ``mcp`` extra (looked up, not imported: the SDK takes a while to load)."""
    from importlib.util import find_spec

    try:
        present = find_spec("mcp") is not None
    except (ImportError, ValueError):
        present = False
    if not present:
        raise BadInput(
            missing_extra("mcp", "`shoal mcp` (the server this config names)"),
            hint=install_hint("mcp"),
        )


def _check_client(client: str) -> None:
    if client not in CLIENTS:
        raise BadInput(f"unknown MCP client {client!r}", hint=f"use one of: {', '.join(CLIENTS)}")


def without_secrets(url: str) -> str:
    """``url`` without a password or token: the user's password (``user:pw@``), a token
    alone in place of an http(s) user, and libpq's ``password=`` option."""
    scheme, sep, rest = url.partition("://")
    if sep and shown_url(url) != url:
        userinfo, _, after = rest.rpartition("@")
        user, colon, _ = userinfo.partition(":")
        rest = f"{user}@{after}" if colon and user else after
        url = f"{scheme}://{rest}"
    parts = urlsplit(url)
    if parts.query and any(k == "password" for k, _ in parse_qsl(parts.query)):
        query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k != "password"])
        url = parts._replace(query=query).geturl()
    return url


def mcp_config(
    client: str,
    store_url: str | None,
    agent: str | None,
    *,
    skills: Sequence[str] = (),
    domains: Sequence[str] = (),
    include_secrets: bool = False,
) -> dict[str, Any]:
    """The JSON that registers ``shoal mcp`` (stdio) with ``client`` (claude, cursor or
    vscode).

    Claude (Code's ``.mcp.json``, Desktop's config) and Cursor (``.cursor/mcp.json``) read
    ``mcpServers``; VS Code (``.vscode/mcp.json``) reads ``servers``, with a ``type``.
    ``store_url`` pins the fleet in ``SHOAL_STORE`` (else the server looks for the nearest
    ``.shoal/fleet.db`` from the folder the client starts it in), without its password
    unless ``include_secrets`` (``without_secrets``; a PostgreSQL password then comes from
    the client's ``PGPASSWORD``); ``agent`` makes the server act as that one agent (with
    ``skills`` and ``domains``).
    """
    _check_client(client)
    args = ["mcp"]
    if agent:
        args += ["--agent", agent]
        for skill in skills:
            args += ["--skill", skill]
        for domain in domains:
            args += ["--domain", domain]
    command, *before = _server_command()
    server: dict[str, Any] = {"command": command, "args": [*before, *args]}
    if store_url:
        kept = store_url if include_secrets else without_secrets(store_url)
        server["env"] = {"SHOAL_STORE": kept}
        if kept != store_url and kept.startswith(("postgres:", "postgresql:")):
            server["env"]["PGPASSWORD"] = _FROM_ENV[client].format("PGPASSWORD")
    if client == "vscode":
        return {"servers": {"shoal": {"type": "stdio", **server}}}
    return {"mcpServers": {"shoal": server}}


def mcp_http_config(client: str, endpoint: str, token: str | None = None) -> dict[str, Any]:
    """The JSON that points ``client`` at ``shoal mcp --transport http`` at ``endpoint``
    (``http://127.0.0.1:8765/mcp``), sending the bearer token: ``token`` itself if given
    (``--include-secrets``), else a reference the client fills in (``SHOAL_MCP_TOKEN`` from
    its environment; VS Code asks for it once)."""
    _check_client(client)
    if token is not None:
        bearer = f"Bearer {token}"
    elif client == "vscode":
        bearer = f"Bearer ${{input:{_VSCODE_INPUT}}}"
    else:
        bearer = _BEARER_FROM_ENV[client]
    server: dict[str, Any] = {"url": endpoint, "headers": {"Authorization": bearer}}
    if client == "cursor":
        return {"mcpServers": {"shoal": server}}
    if client == "claude":
        return {"mcpServers": {"shoal": {"type": "http", **server}}}
    config: dict[str, Any] = {"servers": {"shoal": {"type": "http", **server}}}
    if token is None:
        config["inputs"] = [
            {
                "type": "promptString",
                "id": _VSCODE_INPUT,
                "description": "The bearer token of shoal mcp (from the file it names)",
                "password": True,
            }
        ]
    return config


def _absolute(url: str) -> str:
    """``url`` with a relative SQLite path made absolute (the client starts the server in
    a folder of its choosing)."""
    if not url.startswith("sqlite:"):
        return url
    parts = urlsplit(url)
    raw = (parts.netloc + parts.path) if parts.netloc else parts.path
    if raw.startswith("/"):
        return url
    path = (Path.cwd() / raw).resolve()
    return f"sqlite://{path}" + (f"?{parts.query}" if parts.query else "")


def _fleet_url(given: str | None) -> str | None:
    """The fleet's URL, absolute: ``given`` (``--store`` or ``SHOAL_STORE``) checked by
    opening it, else the nearest ``.shoal/fleet.db``; None when there is none."""
    if given and given.strip().startswith("memory:"):
        raise BadInput(
            "a memory:// fleet lives inside one process: an MCP server would get a new, "
            "empty fleet of its own",
            hint="use a fleet on disk: shoal init, or --store sqlite:///path/fleet.db",
        )
    try:
        fleet = Fleet.open(given, create=False, read_only=True)
    except StoreNotFound:
        if given:
            raise
        return None
    try:
        return _absolute(fleet.url)
    finally:
        fleet.close()


def _http_token(
    host: str, port: int, token_file: Path | None, include: bool
) -> tuple[str | None, str]:
    """The token to write into the config (with ``include`` only) and where the client
    should get it from, in words for stderr."""
    given = read_token(token_file, os.environ)  # checked even when not included
    if token_file is not None:
        where: Path | None = token_file
    elif given is not None:
        return (given if include else None), f"the server's ${TOKEN_ENV}"
    elif is_loopback(host):
        where = local_secrets.mcp_token_file(port)
        if include:  # the file the server makes at start, made now if it has not run yet
            given = local_secrets.make_secret(where, "the bearer token of shoal mcp")
    else:
        raise BadInput(
            f"a server on --host {host} needs a bearer token, and none is given",
            hint=f"give the server's --token-file PATH here too (or set ${TOKEN_ENV})",
        )
    return (given if include else None), str(where)


@click.command("config", short_help="The JSON that registers this server with an MCP client.")
@click.option(
    "--client",
    type=click.Choice(list(CLIENTS)),
    default="claude",
    show_default=True,
    help="claude (Claude Code or Desktop), cursor, or vscode.",
)
@click.option(
    "--transport",
    type=click.Choice(["stdio", "http"]),
    default="stdio",
    show_default=True,
    help="stdio: the client starts the server; http: it connects to `shoal mcp "
    "--transport http` running at --host/--port.",
)
@agent_option("The server acts as this one agent (registered at start).", from_env=False)
@click.option("--skill", "-s", "skills", multiple=True, help="With --agent: a skill (repeat).")
@click.option("--domain", "-d", "domains", multiple=True, help="With --agent: a domain (repeat).")
@click.option("--host", default="127.0.0.1", show_default=True, help="With --transport http.")
@click.option("--port", default=8765, show_default=True, help="With --transport http.")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --transport http: the server's --token-file, if it was given one.",
)
@click.option(
    "--include-secrets",
    is_flag=True,
    help="Write the store URL's password or the bearer token into the JSON itself (keep "
    "that file out of version control); by default the client reads them from its "
    "environment.",
)
@json_flag("JSON (it always is).", hidden=True)
@pass_app
def mcp_config_command(
    app: App,
    client: str,
    transport: str,
    agent: str | None,
    skills: tuple[str, ...],
    domains: tuple[str, ...],
    host: str,
    port: int,
    token_file: Path | None,
    include_secrets: bool,
) -> None:
    """Print the JSON that registers `shoal mcp` with an MCP client: over stdio with this
    fleet's absolute URL (--store, SHOAL_STORE, or the nearest .shoal/fleet.db) in
    SHOAL_STORE, or over HTTP with the server's address. No password or token is written
    unless --include-secrets: stderr says where the client finds them instead.

    \b
    Examples:
      shoal mcp config --client claude > .mcp.json
      shoal mcp config --client cursor --agent cursor-1 --skill python
      shoal mcp config --client vscode --transport http --port 8765 > .vscode/mcp.json
    """
    _check_extra()
    if (skills or domains) and not agent:
        raise BadInput(
            "--skill and --domain describe the server's own agent",
            hint="add --agent ID, or leave them out (each session then registers itself)",
        )
    if transport == "http":
        if agent:
            raise BadInput(
                "--agent is the server's, over HTTP",
                hint="start the server with `shoal mcp --transport http --agent ID`",
            )
        check_port(port)
        token, where = _http_token(host, port, token_file, include_secrets)
        spelled = f"[{host}]" if ":" in host else host
        config = mcp_http_config(client, f"http://{spelled}:{port}/mcp", token)
        click.echo(json.dumps(config, indent=2))
        if token is None:
            ask = (
                "VS Code asks for the bearer token once"
                if client == "vscode"
                else f"the client sends the bearer token from ${TOKEN_ENV} in its environment"
            )
            click.echo(
                f"shoal mcp config: {ask}: it is in {where} "
                f'(e.g. export {TOKEN_ENV}="$(cat {where})")'
                if where.startswith("/")
                else f"shoal mcp config: {ask}: it is {where}",
                err=True,
            )
        _note(f"put it in {CLIENTS[client]}")
        return
    if token_file is not None:
        raise BadInput("--token-file is for --transport http", hint="add --transport http")
    url = _fleet_url(app.store)
    config = mcp_config(
        client, url, agent, skills=skills, domains=domains, include_secrets=include_secrets
    )
    click.echo(json.dumps(config, indent=2))
    if url is not None and not include_secrets and without_secrets(url) != url:
        source = (
            "the client's PGPASSWORD (passed on), or ~/.pgpass (chmod 600)"
            if url.startswith(("postgres:", "postgresql:"))
            else "a git credential helper or an SSH key"
        )
        click.echo(
            "shoal mcp config: the store URL's password is left out (this file is often "
            f"committed); the server gets it from {source}; --include-secrets writes it in",
            err=True,
        )
    where = f"put it in {CLIENTS[client]}"
    if url is None:
        where += "; no fleet found here, so the server looks for .shoal/fleet.db from its folder"
    _note(where)


def _note(text: str) -> None:
    """A word for a person at a terminal (not for a script reading the JSON)."""
    if sys.stderr.isatty():
        click.echo(text, err=True)

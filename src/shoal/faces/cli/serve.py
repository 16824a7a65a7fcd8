"""``shoal serve``: the dashboard, the HTTP API and /metrics (``shoal.faces.web``); and
``shoal token``: the access tokens they ask for.

Like ``shoal mcp --transport http``, the address is checked and bound before anything else,
so a bad one changes nothing. Off loopback the fleet must have a token already: a server
that would hand the fleet to the network with no sign-in does not start. On loopback a fleet
with no token is open to the user who started the server only, who proves it with the
fleet's sign-in secret (``shoal.local_secrets``): the sign-in link printed to their terminal,
or the CLI's remote store, which finds the secret itself. The first ``shoal token create``
closes it. Kept apart from ``shoal.faces.web`` so the CLI can say which extra to install.
"""

from __future__ import annotations

import functools
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path

import click
from rich.table import Table

from shoal import local_secrets
from shoal.access import Credential
from shoal.errors import BadInput
from shoal.extras import install_hint, missing_extra
from shoal.faces import output
from shoal.faces.cli.app import App, json_option, pass_app
from shoal.faces.exposure import allowed_hosts, bind, check_port, is_loopback
from shoal.fleet import Fleet
from shoal.times import iso_time

__all__ = ["add_serve_commands", "run_serve"]


def check_tls(certfile: Path | None, keyfile: Path | None) -> tuple[Path, Path] | None:
    """The certificate and key to serve HTTPS with, loaded once here so that a wrong file is
    a clear refusal (exit 2) before anything listens; None for plain HTTP."""
    if certfile is None and keyfile is None:
        return None
    if certfile is None or keyfile is None:
        raise BadInput(
            "--certfile and --keyfile go together",
            hint="give the certificate chain's file and the private key's file",
        )
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except (OSError, ssl.SSLError) as exc:
        raise BadInput(
            f"cannot serve HTTPS with --certfile {certfile} --keyfile {keyfile}: "
            f"{getattr(exc, 'strerror', None) or exc}",
            hint="give a PEM certificate chain and its unencrypted PEM private key",
        ) from None
    return certfile, keyfile


def run_serve(
    fleet: Fleet,
    host: str,
    port: int,
    allow_hosts: Sequence[str],
    app: App,
    log_level: str,
    tls: tuple[Path, Path] | None = None,
) -> None:
    """Check the address and the fleet's tokens, bind, then serve until stopped."""
    from shoal.faces.exposure import Exposure

    check_port(port)
    exposure = Exposure(host, port, None, allowed_hosts(host, allow_hosts))
    try:
        from shoal.faces.web import serve
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] == "shoal":
            raise
        raise BadInput(missing_extra("web", "`shoal serve`"), hint=install_hint("web")) from None
    tokens = fleet.tokens()
    if not tokens and not is_loopback(host):
        raise BadInput(
            f"--host {host} would serve the fleet beyond this machine with no sign-in",
            hint="make a token first (shoal token create --role admin), or serve on 127.0.0.1",
        )
    secret_file, secret = _sign_in_secret(fleet, host)
    sock = bind(exposure)
    where = f"{'https' if tls else 'http'}://{exposure.address}/"
    if tokens:
        access = "tokens required"
    elif secret_file is not None:
        access = "no token made yet: open to you only, with the sign-in secret"
    else:
        access = "no token made yet"
    say = functools.partial(app.err.print, highlight=False, markup=False)
    say(f"shoal serve: {fleet.where} at {where} ({access})")
    say(f"shoal serve: API {where}api/v1/docs · metrics {where}metrics · Ctrl-C stops")
    if secret_file is not None and not tokens:
        if sys.stderr.isatty():
            # The one place the secret is ever shown: its owner's terminal, not a log file.
            say(f"shoal serve: sign in: {where}login?token={secret}")
            say(f"shoal serve: (the secret is kept in {secret_file}; the CLI finds it)")
        else:
            say(
                f"shoal serve: sign in at {where}login with the secret in {secret_file} "
                "(the CLI finds it)"
            )
    if tls is None and not is_loopback(host):
        say(
            "shoal serve: warning: plain HTTP off this machine -- tokens cross the network "
            "in the clear; serve with --certfile/--keyfile or behind a TLS proxy"
        )
    from shoal.runtime.reaper import Reaper

    forget = functools.partial(local_secrets.forget_server, port)
    try:
        if secret_file is not None:
            local_secrets.record_server(port, secret_file)
        with Reaper(lambda: fleet):  # the record keeps up while the server runs
            serve(
                fleet,
                exposure,
                sock,
                log_level=log_level,
                tls=tls,
                local_secret=secret,
                on_stop=forget,
            )
    finally:
        forget()


def _sign_in_secret(fleet: Fleet, host: str) -> tuple[Path | None, str | None]:
    """On loopback: the file of the fleet's sign-in secret and the secret (made if new),
    which proves its owner while the fleet has no token. Off loopback there is none: the
    tokens are the only way in."""
    if not is_loopback(host):
        return None, None
    where = local_secrets.serve_secret_file(fleet.url)
    return where, local_secrets.make_secret(where, "the sign-in secret of shoal serve")


@click.command(short_help="Serve the dashboard, the HTTP API and /metrics.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8765, show_default=True, help="Port to listen on.")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="A host name browsers and clients may use to reach this server (repeat); the "
    "loopback names and --host are always allowed.",
)
@click.option(
    "--certfile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Serve HTTPS with this PEM certificate chain (with --keyfile).",
)
@click.option(
    "--keyfile",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The PEM private key of --certfile.",
)
@click.option(
    "--log-level",
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
    default="warning",
    show_default=True,
    help="How much the server logs (requests at info).",
)
@pass_app
def serve(
    app: App,
    host: str,
    port: int,
    allow_hosts: tuple[str, ...],
    certfile: Path | None,
    keyfile: Path | None,
    log_level: str,
) -> None:
    """Serve the fleet on the web: a live dashboard for people, a JSON API under /api/v1
    for agents and scripts (OpenAPI at /api/v1/docs), and Prometheus metrics at /metrics.
    Listens on 127.0.0.1:8765 by default; another --host needs a token first (`shoal token
    create`). Needs `pip install 'shoal[web]'`.

    \b
    e.g. shoal serve
         shoal serve --host 0.0.0.0 --allow-host fleet.lan \\
             --certfile fleet.pem --keyfile fleet.key
    """
    app.refuse_memory()
    tls = check_tls(certfile, keyfile)
    run_serve(app.fleet(), host, port, allow_hosts, app, log_level, tls)


@click.group(short_help="Make, list and revoke access tokens for `shoal serve`.")
def token() -> None:
    """Access tokens for `shoal serve`: viewer (reads), agent (acts as one agent only), admin
    (everything). The fleet keeps only a hash; a token is shown once, when it is made. A
    fleet with no token is open on loopback; the first token closes it.

    \b
    e.g. shoal token create --role viewer --name grafana
         shoal token list
    """


@token.command("create", short_help="Make a token; it is printed once.")
@click.option(
    "--role",
    type=click.Choice(["viewer", "agent", "admin"]),
    required=True,
    help="viewer reads; agent acts as --agent only; admin does everything.",
)
@click.option("--agent", help="With --role agent: the one agent the token acts as.")
@click.option("--name", default="", help="A note on what the token is for (shown in lists).")
@json_option
@pass_app
def token_create(app: App, role: str, agent: str | None, name: str) -> None:
    """Make an access token and print it. Keep it: the fleet keeps only its hash, so it
    cannot be shown again (revoke it and make another if lost).

    \b
    e.g. shoal token create --role admin --name me
         shoal token create --role agent --agent ann --json
    """
    credential, secret = app.fleet(create=False).create_token(role, agent=agent, name=name)
    data = {**credential.to_dict(), "created": iso_time(credential.created), "token": secret}
    app.emit(data, f"{secret}\n(token {credential.id}, role {credential.role}; shown once)")


@token.command("list", short_help="The fleet's tokens (never their secrets).")
@json_option
@pass_app
def token_list(app: App) -> None:
    """The fleet's access tokens: id, role, agent, name, when made. Secrets are not kept.

    \b
    e.g. shoal token list --json
    """
    found = app.fleet(read_only=True).tokens()
    app.emit(
        [_row(c) for c in found], _table(found), empty="no tokens: the fleet is open on loopback"
    )


@token.command("revoke", short_help="End a token.")
@click.argument("token_id")
@json_option
@pass_app
def token_revoke(app: App, token_id: str) -> None:
    """End the token TOKEN_ID (as `shoal token list` shows it); servers refuse it within
    two seconds.

    \b
    e.g. shoal token revoke 3f2a9c1e
    """
    credential = app.fleet().revoke_token(token_id)
    app.emit(_row(credential), f"revoked token {credential.id} ({credential.role})")


def _row(credential: Credential) -> dict[str, object]:
    return {**credential.to_dict(), "created": iso_time(credential.created)}


def _table(found: list[Credential]) -> Table:
    table = Table(box=None)
    for column in ("id", "role", "agent", "name", "created"):
        table.add_column(column)
    for c in found:
        table.add_row(
            c.id,
            str(c.role),
            output.clean(c.agent or ""),
            output.clean(c.name),
            iso_time(c.created),
        )
    return table


def add_serve_commands(group: click.Group) -> None:
    """Register ``serve`` and ``token`` on the ``shoal`` group."""
    group.add_command(serve)
    group.add_command(token)

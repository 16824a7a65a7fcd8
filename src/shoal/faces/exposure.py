"""Where a shoal server listens and who may reach it: the checks ``shoal mcp --transport
http`` and ``shoal serve`` share, with no web library in sight.

- **The address is checked and bound first.** A port outside 1..65535 is bad input (exit 2);
  an address that cannot be bound -- in use, not this machine's, a port the user may not
  take -- is ``AddressUnavailable`` (exit 4), naming the address and what to do. The socket
  is bound here and handed to uvicorn, so the failure is shoal's words, not a server log.
- **Loopback is the default**, and ``is_loopback`` is the one test of it.
- **Host names let through** the Host/Origin check (DNS rebinding): the loopback names
  always, the bound address if it is a specific one, and each ``--allow-host NAME``.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from shoal import local_secrets
from shoal.errors import AddressUnavailable, BadInput

__all__ = [
    "LOOPBACK_NAMES",
    "MIN_TOKEN",
    "SCHEMES",
    "TOKEN_ENV",
    "WILDCARDS",
    "WRONG_TOKEN_DELAY",
    "Exposure",
    "allowed_hosts",
    "bind",
    "check_port",
    "is_loopback",
    "plan_exposure",
    "read_token",
]

#: The environment's bearer token (``--token-file`` wins).
TOKEN_ENV = "SHOAL_MCP_TOKEN"
#: The shortest bearer token accepted, in characters.
MIN_TOKEN = 16
#: Seconds a request with a wrong bearer token waits before its 401.
WRONG_TOKEN_DELAY = 0.5

SCHEMES = ("http", "https")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("", "0.0.0.0", "::")  # every interface: not a name a client can use


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Exposure:
    """Where an HTTP server listens and who may use it; the token is kept out of ``repr``."""

    host: str
    port: int
    token: str | None = field(default=None, repr=False)
    allowed: tuple[str, ...] = ()  # host names the Host/Origin check lets through
    made_token: Path | None = None  # the token file made for a loopback server given none

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def check_port(port: int) -> int:
    """``port`` if it is one a server can listen on (1..65535), else ``BadInput``."""
    if not 1 <= port <= 65535:
        raise BadInput(
            f"--port {port} is not a TCP port: it must be from 1 to 65535",
            hint="e.g. --port 8765 (the default)",
        )
    return port


def read_token(token_file: Path | None, environ: Mapping[str, str]) -> str | None:
    """The bearer token: from ``token_file`` (only its owner may read it) or ``$TOKEN_ENV``;
    None if neither is given. Refused (``BadInput``) when unsafe or too short; the messages
    never quote the token."""
    if token_file is not None:
        try:
            with open(token_file, "rb") as handle:
                mode = os.fstat(handle.fileno()).st_mode
                raw = handle.read(4096)
        except OSError as exc:
            raise BadInput(
                f"--token-file {token_file}: cannot read it ({exc.strerror})",
                hint="give a file holding the bearer token, readable by you only (chmod 600)",
            ) from None
        if not stat.S_ISREG(mode):
            raise BadInput(f"--token-file {token_file} is not a regular file")
        if mode & 0o077:
            raise BadInput(
                f"--token-file {token_file} can be read by others (mode "
                f"{stat.S_IMODE(mode):04o}); a bearer token must be its owner's only",
                hint=f"chmod 600 {token_file}",
            )
        try:
            token, where = raw.decode().strip(), f"--token-file {token_file}"
        except UnicodeDecodeError:
            raise BadInput(f"--token-file {token_file} does not hold text") from None
    elif environ.get(TOKEN_ENV):
        token, where = environ[TOKEN_ENV].strip(), f"${TOKEN_ENV}"
    else:
        return None
    if len(token) < MIN_TOKEN or any(c.isspace() or not c.isprintable() for c in token):
        raise BadInput(
            f"the bearer token in {where} is too weak: it must be at least {MIN_TOKEN} "
            "printable characters with no spaces",
            hint="make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
        )
    return token


def plan_exposure(
    host: str,
    port: int,
    *,
    token_file: Path | None = None,
    allow_hosts: Sequence[str] = (),
    environ: Mapping[str, str] | None = None,
) -> Exposure:
    """Check how ``shoal mcp --transport http`` would listen, before anything starts: the
    port, the token and the host names let through. A token is always required: given
    (``token_file`` or ``$TOKEN_ENV``; a must off loopback), or on loopback made in a file
    only this user reads (``shoal.local_secrets.mcp_token_file``) if none is given."""
    check_port(port)
    env = os.environ if environ is None else environ
    token = read_token(token_file, env)
    if token is None and not is_loopback(host):
        raise BadInput(
            f"--host {host} would serve the fleet beyond this machine with no authentication",
            hint=f"give a bearer token with --token-file PATH (chmod 600) or ${TOKEN_ENV}, "
            "or serve on 127.0.0.1",
        )
    allowed = allowed_hosts(host, allow_hosts)
    if token is None:
        # Loopback is not trust: other users of the machine reach it too. The token is
        # made in a file only this user can read, and clients are pointed at it.
        made = local_secrets.mcp_token_file(port, env)
        token = local_secrets.make_secret(made, "the bearer token of shoal mcp")
        return Exposure(host, port, token, allowed, made_token=made)
    return Exposure(host, port, token, allowed)


def allowed_hosts(host: str, allow_hosts: Sequence[str]) -> tuple[str, ...]:
    """The host names a server bound to ``host`` answers to: the loopback names, ``host``
    itself unless it is a wildcard, and each of ``allow_hosts`` (checked: ``BadInput``)."""
    allowed = list(LOOPBACK_NAMES)
    if host not in WILDCARDS:
        allowed.append(host)
    for given in allow_hosts:
        name = given.strip()
        if not name or any(c in name for c in "/@* \t"):
            raise BadInput(
                f"--allow-host {given!r} is not a host name", hint="e.g. --allow-host fleet.lan"
            )
        allowed.append(name)
    return tuple(dict.fromkeys(allowed))


def bind(exposure: Exposure) -> socket.socket:
    """A socket bound to ``exposure``'s address, or ``AddressUnavailable`` saying why not and
    what to do (before the server takes a single request)."""
    family = socket.AF_INET6 if ":" in exposure.host else socket.AF_INET
    try:
        infos = socket.getaddrinfo(exposure.host or None, exposure.port, family, socket.SOCK_STREAM)
    except socket.gaierror:
        raise BadInput(
            f"--host {exposure.host}: no such address (it does not resolve)",
            hint="give an address of this machine, e.g. 127.0.0.1",
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(infos[0][4])
    except OSError as exc:
        sock.close()
        raise _bind_error(exposure, exc) from None
    sock.set_inheritable(True)
    return sock


def _bind_error(exposure: Exposure, exc: OSError) -> AddressUnavailable:
    where = exposure.address
    if exc.errno == errno.EADDRINUSE:
        return AddressUnavailable(
            f"cannot listen on {where}: the address is in use (another server listens there)",
            hint=f"choose another --port, or stop what listens on port {exposure.port}",
        )
    if exc.errno == errno.EADDRNOTAVAIL:
        return AddressUnavailable(
            f"cannot listen on {where}: {exposure.host} is not an address of this machine",
            hint="give one of this machine's addresses with --host, e.g. 127.0.0.1",
        )
    if exc.errno == errno.EACCES:
        return AddressUnavailable(
            f"cannot listen on {where}: permission denied (ports below 1024 are the system's)",
            hint="choose a --port from 1024 up",
        )
    return AddressUnavailable(
        f"cannot listen on {where}: {exc.strerror or exc}",
        hint="check --host and --port",
    )

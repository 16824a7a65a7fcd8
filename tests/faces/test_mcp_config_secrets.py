"""`shoal mcp --transport http` on loopback with no token given is not open to the machine:
it makes a token in a file only its user can read and requires it; `shoal mcp config`
points a client at that token -- and at a store URL's password -- without writing either
into the config (a file projects commit) unless asked with --include-secrets."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import anyio
import pytest

pytest.importorskip("mcp")

from shoal import Fleet
from shoal.faces.cli.mcp_config import mcp_config, without_secrets
from shoal.local_secrets import mcp_token_file, read_secret
from tests.faces.cli_support import COMMAND, base_env
from tests.faces.mcp_support import call, free_port, http_server, http_session
from tests.helpers import as_another_user

pytestmark = pytest.mark.slow

INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "curl", "version": "1"},
        },
    }
)


def config(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args],
        cwd=cwd,
        env=base_env(env or {}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_loopback_http_server_needs_its_token_and_another_user_cannot_read_it(
    tmp_path: Path,
) -> None:
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    with http_server(url) as endpoint:
        port = urlsplit(endpoint).port
        assert port is not None
        made = mcp_token_file(port)
        info = os.lstat(made)
        assert stat.S_IMODE(info.st_mode) == 0o600 and info.st_uid == os.geteuid()
        token = read_secret(made, "the token")
        assert token is not None
        headers = ["-H", "Content-Type: application/json",
                   "-H", "Accept: application/json, text/event-stream"]  # fmt: skip
        for extra in ([], ["-H", "Authorization: Bearer " + "g" * 43]):
            done = as_another_user(
                "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST",
                *headers, *extra, "--data", INITIALIZE, endpoint,
                env={"PATH": "/usr/bin:/bin"},
            )  # fmt: skip
            assert done.stdout == "401", (extra, done.stdout, done.stderr)
        peek = as_another_user("cat", str(made), env={"PATH": "/usr/bin:/bin"})
        assert peek.returncode != 0 and token not in peek.stdout

        async def owner() -> dict[str, Any]:
            async with http_session(endpoint, token=token) as session:
                return await call(session, "register_agent", agent="ada")

        assert anyio.run(owner)["agent"]["id"] == "ada"


def test_mcp_config_points_an_http_client_at_the_token_without_writing_it(
    tmp_path: Path,
) -> None:
    port = free_port()
    for client in ("claude", "cursor", "vscode"):
        done = config("mcp", "config", "--client", client, "--transport", "http",
                      "--port", str(port), cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        key = "servers" if client == "vscode" else "mcpServers"
        server = data[key]["shoal"]
        assert server["url"] == f"http://127.0.0.1:{port}/mcp"
        bearer = server["headers"]["Authorization"]
        assert (
            bearer
            == {
                "claude": "Bearer ${SHOAL_MCP_TOKEN}",
                "cursor": "Bearer ${env:SHOAL_MCP_TOKEN}",
                "vscode": "Bearer ${input:shoal-mcp-token}",
            }[client]
        )
        if client == "vscode":
            assert data["inputs"][0]["password"] is True
        assert str(mcp_token_file(port)) in done.stderr  # where the client finds it
    # The server started on that port uses the very token the config points at.
    url = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(url).close()
    included = config("mcp", "config", "--transport", "http", "--port", str(port),
                      "--include-secrets", cwd=tmp_path)  # fmt: skip
    assert included.returncode == 0, included.stderr
    written = json.loads(included.stdout)["mcpServers"]["shoal"]["headers"]["Authorization"]
    assert written == f"Bearer {read_secret(mcp_token_file(port), 'the token')}"


def test_mcp_config_leaves_a_store_password_out_unless_asked(
    postgres_url: str, tmp_path: Path
) -> None:
    parts = urlsplit(postgres_url)
    assert parts.password is None
    secret_url = postgres_url.replace(f"//{parts.username}@", f"//{parts.username}:s3cr3t-pw@")
    Fleet.init(postgres_url).close()
    done = config("--store", secret_url, "mcp", "config", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "s3cr3t-pw" not in done.stdout + done.stderr
    env = json.loads(done.stdout)["mcpServers"]["shoal"]["env"]
    assert env["SHOAL_STORE"] == postgres_url
    assert env["PGPASSWORD"] == "${PGPASSWORD:-}"
    assert "--include-secrets" in done.stderr and "~/.pgpass" in done.stderr
    kept = config("--store", secret_url, "mcp", "config", "--include-secrets", cwd=tmp_path)
    assert kept.returncode == 0, kept.stderr
    assert json.loads(kept.stdout)["mcpServers"]["shoal"]["env"] == {"SHOAL_STORE": secret_url}


def test_bad_mcp_config_requests_are_refused_in_words(tmp_path: Path) -> None:
    for args, words in [
        (("--transport", "http", "--port", "0"), "--port 0"),
        (("--transport", "http", "--host", "0.0.0.0"), "needs a bearer token"),
        (("--transport", "http", "--agent", "ada"), "--agent"),
        (("--token-file", str(tmp_path / "t")), "--transport http"),
    ]:
        done = config("mcp", "config", *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert words in done.stderr and done.stdout == "", (args, done.stderr)


def test_secrets_are_taken_out_of_every_kind_of_url() -> None:
    for given, kept in [
        ("postgresql://ada:pw@db/fleet", "postgresql://ada@db/fleet"),
        ("postgresql://ada:p/w?x#y@db/fleet?schema=a", "postgresql://ada@db/fleet?schema=a"),
        ("postgresql://ada@db/fleet?password=pw&schema=a", "postgresql://ada@db/fleet?schema=a"),
        ("git+https://ghp_token@github.com/o/r.git", "git+https://github.com/o/r.git"),
        ("git+ssh://git@host/r.git", "git+ssh://git@host/r.git"),
        ("sqlite:///srv/fleet.db", "sqlite:///srv/fleet.db"),
    ]:
        assert without_secrets(given) == kept, given
    written = mcp_config("cursor", "postgresql://ada:pw@db/f", None)["mcpServers"]["shoal"]
    assert written["env"] == {
        "SHOAL_STORE": "postgresql://ada@db/f",
        "PGPASSWORD": "${env:PGPASSWORD}",
    }

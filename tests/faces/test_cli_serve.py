# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""`shoal token` and `shoal serve` through the real script: tokens made, listed and revoked
without ever showing a secret twice, and a server that refuses a bad address or an open
network bind before it touches the fleet, then serves and stops cleanly."""

from __future__ import annotations

import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from shoal import Fleet
from tests.faces.cli_support import Shoal, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot as snapshot_of


def snapshot(url: str) -> dict[str, object]:
    with Fleet.open(url) as fleet:
        return {**snapshot_of(fleet), "tokens": fleet.tokens()}


def test_a_token_is_shown_once_listed_without_its_secret_and_revoked(
    shoal: Shoal, url: str
) -> None:
    made = shoal("token", "create", "--role", "agent", "--agent", "ann", "--name", "ci", "--json")
    assert made.code == 0, made
    secret = made.data["token"]
    assert secret.startswith("shoal_") and made.data["role"] == "agent"
    listed = shoal("token", "list", "--json")
    assert [t["id"] for t in listed.data] == [made.data["id"]]
    assert secret not in listed.out and listed.data[0]["agent"] == "ann"
    with Fleet.open(url) as fleet:
        assert fleet.authenticate(secret) is not None
    assert shoal("token", "revoke", made.data["id"]).code == 0
    assert shoal("token", "list", "--json").data == []
    with Fleet.open(url) as fleet:
        assert fleet.authenticate(secret) is None


def test_bad_token_requests_say_what_was_wrong_and_change_nothing(shoal: Shoal, url: str) -> None:
    before = snapshot(url)
    for args, words in [
        (("--role", "root"), "root"),
        (("--role", "agent"), "names its agent"),
        (("--role", "viewer", "--agent", "ann"), "names its agent"),
        (("--role", "agent", "--agent", "no spaces"), "not valid"),
        (("--role", "admin", "--name", "a\x1b[31m"), "name"),
    ]:
        result = shoal("token", "create", *args)
        assert result.code == 2, (args, result)
        assert words in result.text, (args, result.text)
    assert shoal("token", "revoke", "zz").code == 2
    missing = shoal("token", "revoke", "0badc0de")
    assert missing.code == 2 and "no token 0badc0de" in missing.text
    assert snapshot(url) == before


def test_serve_refuses_an_address_it_should_not_take_before_touching_the_fleet(
    shoal: Shoal, url: str
) -> None:
    before = snapshot(url)
    open_lan = shoal("serve", "--host", "0.0.0.0", "--port", "1")
    assert open_lan.code == 2 and "no sign-in" in open_lan.text
    assert "shoal token create" in open_lan.text
    assert shoal("serve", "--port", "99999").code == 2
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        in_use = shoal("serve", "--port", port)
    assert in_use.code == 4 and "in use" in in_use.text
    assert "Traceback" not in open_lan.err + in_use.err
    assert snapshot(url) == before


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_up(base: str, server: subprocess.Popen[str], deadline: float = 30.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        assert server.poll() is None, server.communicate()
        try:
            if httpx.get(f"{base}/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)  # polling a server coming up, not waiting for time to pass
    raise AssertionError("shoal serve did not come up")


def test_serve_answers_with_a_token_and_stops_on_sigterm(shoal: Shoal, url: str) -> None:
    secret = shoal("token", "create", "--role", "viewer", "--json").data["token"]
    port = _free_port()
    server = shoal.popen("serve", "--port", str(port), "--log-level", "info")
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base, server)
        assert httpx.get(f"{base}/api/v1/status").status_code == 401
        seen = httpx.get(f"{base}/api/v1/status", headers={"Authorization": f"Bearer {secret}"})
        assert seen.status_code == 200 and seen.json()["counts"]["pending"] == 0
    finally:
        server.send_signal(signal.SIGTERM)
        out, err = server.communicate(timeout=20)
    # uvicorn stops gracefully, then ends by the signal it was sent, as a server should.
    assert server.returncode in (0, -signal.SIGTERM), err
    assert "Shutting down" in err and "Traceback" not in err
    assert f"{base}/" in err and "tokens required" in err
    assert secret not in out + err, "the server logged a token"


def _self_signed(folder: Path) -> tuple[Path, Path]:
    cert, key = folder / "fleet.pem", folder / "fleet.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


def test_serve_speaks_https_with_a_certificate_and_refuses_a_bad_one(
    shoal: Shoal, url: str, tmp_path: Path
) -> None:
    cert, key = _self_signed(tmp_path)
    half = shoal("serve", "--certfile", str(cert))
    assert half.code == 2 and "go together" in half.text
    wrong = shoal("serve", "--certfile", str(key), "--keyfile", str(key))
    assert wrong.code == 2 and "cannot serve https" in wrong.text
    port = _free_port()
    server = shoal.popen(
        "serve", "--port", str(port), "--certfile", str(cert), "--keyfile", str(key)
    )
    base = f"https://127.0.0.1:{port}"
    trusting = ssl.create_default_context(cafile=str(cert))
    try:
        end = time.monotonic() + 30
        while True:
            assert server.poll() is None, server.communicate()
            try:
                answer = httpx.get(f"{base}/api/v1/health", verify=trusting, timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < end, "shoal serve did not come up over HTTPS"
                time.sleep(0.05)  # polling a server coming up
        assert answer.status_code == 200
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/api/v1/health", timeout=2)
    finally:
        server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=20)
    assert f"{base}/" in err

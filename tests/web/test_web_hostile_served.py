"""``shoal serve`` in its own process, attacked over raw sockets: what only the real server
(uvicorn's HTTP parser) decides."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from shoal import Fleet
from shoal.faces.web.app import MAX_HEADERS
from tests.web.remote_support import served

pytestmark = pytest.mark.slow


def _send_header_of(url: str, size: int) -> tuple[int, bytes]:
    """Send a request whose one header is ``size`` bytes, in 64 KiB pieces, until the
    server answers or hangs up: (bytes of the header sent, the server's answer)."""
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    sent = 0
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(f"GET /api/v1/health HTTP/1.1\r\nHost: {parts.netloc}\r\nX-Big: ".encode())
        piece = b"a" * 65536
        try:
            while sent < size:
                sock.sendall(piece)
                sent += len(piece)
            sock.sendall(b"\r\n\r\n")
        except OSError:  # the server hung up mid-header: what it should do
            pass
        try:
            answer = sock.recv(65536)
        except OSError:
            answer = b""
    return sent, answer


def test_a_huge_header_is_refused_before_it_is_held(tmp_path: Path) -> None:
    """httptools (uvicorn's default parser) buffers a header of any size: one client with a
    300 MB header made the server hold 300 MB. The server stops reading at ``MAX_HEADERS``
    and hangs up, and goes on serving everyone else."""
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(store).close()
    with served(store, tmp_path) as (url, _proc):
        sent, answer = _send_header_of(url, 64 * 1024 * 1024)
        assert sent < 16 * 1024 * 1024, "the server read a 64 MiB header to its end"
        assert not answer.startswith(b"HTTP/1.1 200"), answer[:100]
        _, fine = _send_header_of(url, MAX_HEADERS // 2)
        assert fine.startswith(b"HTTP/1.1 200"), fine[:100]
        assert httpx.get(f"{url}/api/v1/health").status_code == 200

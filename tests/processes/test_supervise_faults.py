"""`shoal supervise` under attack and under `kill -9`: real supervisor, worker and command
processes, on SQLite and PostgreSQL.

* A supervisor killed by SIGKILL takes its workers with it: each sees the end of the pipe
  the supervisor held, stops its command, releases its task untouched and leaves, saying
  why in the fleet's event log.
* No secret reaches a command line, which every user of the host may read: not the store's
  password (workers get the store in their environment), not a lease token.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from contextlib import suppress
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from shoal import Fleet, TaskState
from tests.helpers import wait_until
from tests.workers import pid_alive, running

pytestmark = pytest.mark.slow

#: A task's command: it says its pid, and runs until killed.
LONG = 'echo $$ > "$SHOAL_TASK_ID.pid"; exec sleep 60'


def written(path: Path) -> str | None:
    """The text of a file another process writes, once it has written something."""
    with suppress(OSError):
        return path.read_text().strip() or None
    return None


def test_a_killed_supervisor_takes_its_workers_and_their_commands_with_it(
    shared_store: tuple[str, str], tmp_path: Path
) -> None:
    _kind, url = shared_store
    with Fleet.init(url) as fleet:
        tasks = [fleet.post(f"long job {i}", max_attempts=3).id for i in range(2)]
        with running(url, "supervise", "--max-agents", "2", "--min", "2", "--interval", "0.1",
                     "--prefix", "w", "--json", "--", "sh", "-c", LONG,
                     cwd=tmp_path) as sup:  # fmt: skip
            commands = [
                int(wait_until(lambda i=i: written(tmp_path / f"{i}.pid"), "a command"))
                for i in tasks
            ]
            workers = [e["pid"] for e in sup.events("spawned")]
            assert len(workers) == 2
            os.kill(sup.popen.pid, signal.SIGKILL)
            sup.wait()
            try:
                wait_until(lambda: not any(pid_alive(p) for p in workers + commands),
                           "the workers and their commands to end with the supervisor")  # fmt: skip
            finally:  # leave nothing behind, whatever happened
                for pid in workers + commands:
                    with suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
        for task_id in tasks:
            back = fleet.get(task_id)
            assert back.state is TaskState.PENDING and back.attempts == 0, back  # untouched
            assert back.agent is None  # in the pool, for the next supervisor's workers
            kinds = [e.kind for e in fleet.events(task=task_id)]
            assert kinds == ["posted", "claimed", "released"]
        why = f"its supervisor (pid {sup.popen.pid}) died"
        ends = {e.agent: e.data["why"] for e in fleet.events() if e.kind == "agent.terminated"}
        assert ends == {"w-1": why, "w-2": why}


def with_password(url: str) -> tuple[str, str]:
    """``url`` and the password in it: its own, or one put in (the tests' private cluster
    trusts local connections, so it takes any password and ignores it)."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    password = f"pw-{uuid.uuid4().hex}"
    user, _, host = parts.netloc.rpartition("@")
    netloc = f"{user or 'postgres'}:{password}@{host}"
    return urlunsplit(parts._replace(netloc=netloc)), password


def command_lines() -> dict[int, bytes]:
    """What any user of the host can read: every process's command line."""
    lines = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with suppress(OSError):
                lines[int(entry)] = Path(f"/proc/{entry}/cmdline").read_bytes()
    return lines


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as another user of the host (nobody)."""
    setpriv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run([*setpriv, *argv], capture_output=True, text=True, check=False)


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_no_password_nor_lease_token_is_on_any_command_line_of_a_supervised_fleet(
    postgres_url: str, tmp_path: Path
) -> None:
    url, password = with_password(postgres_url)
    script = 'echo "$SHOAL_TOKEN" > "$SHOAL_TASK_ID.token"; while [ ! -f go ]; do sleep 0.05; done'
    with Fleet.init(url) as fleet:
        tasks = [fleet.post(f"job {i}").id for i in range(2)]
        with running(url, "supervise", "--max-agents", "2", "--min", "2", "--interval", "0.1",
                     "--prefix", "w", "--json", "--", "sh", "-c", script,
                     cwd=tmp_path) as sup:  # fmt: skip
            tokens = [
                wait_until(lambda i=i: written(tmp_path / f"{i}.token"), "a command's token")
                for i in tasks
            ]
            workers = [e["pid"] for e in sup.events("spawned")]
            assert len(workers) == 2
            # Every process of the host while the workers and their commands run.
            seen = command_lines()
            assert set(workers) <= set(seen)
            for pid, line in seen.items():
                for secret in (password, *tokens):
                    assert secret.encode() not in line, (pid, line)
            if os.geteuid() == 0 and shutil.which("setpriv"):
                # Another user reads a worker's command line, but not its environment.
                other = as_nobody("cat", f"/proc/{workers[0]}/cmdline")
                assert other.returncode == 0 and "worker" in other.stdout
                assert password not in other.stdout
                refused = as_nobody("cat", f"/proc/{workers[0]}/environ")
                assert refused.returncode != 0 and password not in refused.stdout
            (tmp_path / "go").touch()
            wait_until(lambda: all(fleet.get(i).state is TaskState.DONE for i in tasks), "the work")
            sup.signal(signal.SIGTERM)
            assert sup.wait() == 0, sup.text()

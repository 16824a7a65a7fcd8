"""What the CLI tests share: a ``Shoal`` that runs the installed ``shoal`` script in a real
subprocess, its ``Result``, and the fixtures of a real SQLite fleet in ``tmp_path``.

Almost every CLI test runs the script against that fleet, and asserts on what a caller
relies on: the exit code (0 ok, 1 nothing to do, 2 bad input, 3 lease lost or conflict, 4
store unavailable), the JSON it prints with ``--json``, and the key words of its human
messages (never rich's layout). Every refused command is also checked to have changed
nothing. Setup and checks of the fleet's state go through the Fleet API in this process
(fast); a few broad output checks call ``shoal.faces.cli.main`` in this process too (much
cheaper than a process), through the ``cli`` fixture.

The fixtures are imported by the test modules that use them, not put in a conftest: the
suite's own ``fleet`` fixture (every store) must stay what the other face tests get.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet
from shoal.faces.cli import main

ENV_NAMES = ("SHOAL_STORE", "SHOAL_AGENT", "SHOAL_TOKEN")
SCRIPT = Path(sys.executable).with_name("shoal")
COMMAND = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "shoal.faces.cli"]
ERROR_KEYS = {"code", "message", "hint"}


# ---------------------------------------------------------------------- helpers


@dataclass(frozen=True)
class Result:
    """What one `shoal` command did: its exit code and both output streams."""

    code: int
    out: str
    err: str

    @property
    def data(self) -> Any:
        """stdout as JSON (for --json commands)."""
        return json.loads(self.out)

    @property
    def text(self) -> str:
        """Both streams, lower-cased, with runs of whitespace (rich's wrapping) as one space."""
        return " ".join((self.out + " " + self.err).split()).lower()


def base_env(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment without shoal's variables, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update(COLUMNS="200", NO_COLOR="1")
    env.update(extra)
    return env


class Shoal:
    """Runs the real `shoal` script in a subprocess, in a folder, with an environment."""

    def __init__(self, cwd: Path, env: Mapping[str, str] | None = None) -> None:
        self.cwd = cwd
        self.env = dict(env or {})

    def _env(self, env: Mapping[str, str] | None) -> dict[str, str]:
        return base_env({**self.env, **(env or {})})

    def __call__(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stdin: str | None = None,
    ) -> Result:
        proc = subprocess.run(
            [*COMMAND, *args],
            cwd=cwd or self.cwd,
            env=self._env(env),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        """A `shoal` process the test talks to and signals. It turns Ctrl-C back on first: a
        shell running the suite as a background job starts it with SIGINT ignored, which the
        child would inherit, and the tests of Ctrl-C could not reach it."""
        return subprocess.Popen(
            [sys.executable, "-c", CTRL_C_ON, *args],
            cwd=self.cwd,
            env=self._env(None),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


CTRL_C_ON = (
    "import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "from shoal.faces.cli import main; main()"
)


def claim_one(shoal: Shoal, agent: str) -> tuple[int, str]:
    """`shoal claim --agent AGENT --json`, which must hand out one task: (its id, the token)."""
    result = shoal("claim", "--agent", agent, "--json")
    assert result.code == 0, result
    return result.data["task"]["id"], result.data["lease"]["token"]


def files_under(folder: Path) -> list[Path]:
    return sorted(folder.rglob("*"))


@pytest.fixture
def url(tmp_path: Path) -> str:
    """A new, empty SQLite fleet in tmp_path (created here: it is setup, not under test)."""
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(store).close()
    return store


@pytest.fixture
def shoal(tmp_path: Path, url: str) -> Shoal:
    """`shoal` in a work folder, with SHOAL_STORE pointing at the test fleet."""
    work = tmp_path / "work"
    work.mkdir()
    return Shoal(work, {"SHOAL_STORE": url})


@pytest.fixture
def fleet(url: str) -> Iterator[Fleet]:
    """The same fleet opened in this process: to set up state and to check the CLI's effects."""
    with Fleet.open(url) as opened:
        yield opened


@pytest.fixture
def cli(
    url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    """`shoal --store URL ARGS...` in this process, through ``main`` (exit codes included)."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str) -> Result:
        with pytest.raises(SystemExit) as stop:
            main(["--store", url, *args])
        captured = capsys.readouterr()
        return Result(int(stop.value.code or 0), captured.out, captured.err)

    return run

"""``shoal.faces.cli.fast`` runs the agent loop's everyday calls without click; each call it
takes must do exactly what the click command does. Every form here runs twice, on two
fleets built alike: once by ``shoal``'s entry point (which gives it to ``fast``) and once by
the click group alone (``root.main``); what each prints on stdout and stderr and its exit
code must match (timestamps, tokens and ages masked), and so must the fleets after.
Forms ``fast`` must leave to click -- help, a value click converts or refuses, an option
it does not know -- are checked to be left, untouched."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from shoal import Fleet
from shoal.faces.cli import fast
from shoal.faces.cli import main as shoal_main
from shoal.faces.cli.root import main as click_main

#: What differs between two runs of one command: moments, lease tokens, ages.
MASKS = [
    (re.compile(r"\d{4}-\d\d-\d\dT[\d:.]+Z"), "<time>"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "<token>"),
    (re.compile(r"\b\d+(\.\d+)?(s|m|h|d)( \d+(s|m|h))?( ago)?\b|just now"), "<age>"),
    (re.compile(r"\d+\.\d+"), "<number>"),
]


def masked(text: str) -> str:
    for pattern, mask in MASKS:
        text = pattern.sub(mask, text)
    return text


class Pair:
    """Two fleets built alike; ``run`` gives the same call to each, one way each."""

    def __init__(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        self.urls = {}
        for way in ("fast", "click"):
            url = f"sqlite:///{tmp_path / way / 'fleet.db'}"
            (tmp_path / way).mkdir()
            with Fleet.open(url, create=True) as fleet:
                fleet.register("ada", skills=["python"])
                fleet.register("bob", max_concurrent=2)
                for i in range(3):
                    fleet.post(f"task {i}", skills=["python"] if i == 0 else [])
            self.urls[way] = url
        self.capsys = capsys
        self.env: dict[str, dict[str, str]] = {"fast": {}, "click": {}}

    def one(
        self, way: str, args: list[str], monkeypatch: pytest.MonkeyPatch
    ) -> tuple[int, str, str]:
        entry: Callable[[list[str]], object] = shoal_main if way == "fast" else click_main
        with monkeypatch.context() as m:
            m.setenv("SHOAL_STORE", self.urls[way])
            for name, value in self.env[way].items():
                m.setenv(name, value)
            if way == "fast":
                assert fast._plan(args) is not None, f"fast does not take {args}"
            with pytest.raises(SystemExit) as stop:
                entry(args)
        out, err = self.capsys.readouterr()
        return int(stop.value.code or 0), out, err

    def run(self, args: list[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
        """Run ``args`` both ways; assert they match; the fast way's result."""
        got = {way: self.one(way, args, monkeypatch) for way in ("fast", "click")}
        fast_code, fast_out, fast_err = got["fast"]
        click_code, click_out, click_err = got["click"]
        assert fast_code == click_code, (args, got)
        assert masked(fast_out) == masked(click_out), args
        assert masked(fast_err) == masked(click_err), args
        for way, (_code, out, _err) in got.items():  # eval what --format env printed
            for line in out.splitlines():
                if line.startswith("export "):
                    name, _, value = line.removeprefix("export ").partition("=")
                    self.env[way][name] = shlex.split(value)[0]
        return got["fast"]

    def states(self) -> Iterator[list[tuple[object, ...]]]:
        for way in ("fast", "click"):
            with Fleet.open(self.urls[way]) as fleet:
                yield [(t.id, t.state, t.agent, t.result, t.attempts) for t in fleet.tasks()]


@pytest.fixture
def pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Pair:
    return Pair(tmp_path, capsys)


def test_the_agent_loop_runs_alike_either_way(pair: Pair, monkeypatch: pytest.MonkeyPatch) -> None:
    code, out, _ = pair.run(["claim", "--agent", "ada", "--format", "env"], monkeypatch)
    assert code == 0 and "export SHOAL_TASK=" in out
    assert pair.run(["done"], monkeypatch)[0] == 0  # SHOAL_TASK and SHOAL_LEASE from the eval
    assert pair.run(["done"], monkeypatch)[0] == 0  # again: already done, nothing changed
    code, out, _ = pair.run(["claim", "-abob", "-n", "2", "--json"], monkeypatch)
    assert code == 0 and '"claimed"' in out
    ids = [pair.env["fast"].get(k) for k in ("SHOAL_TASK",)]
    assert ids == [None] or ids  # --json sets no environment
    code, out, err = pair.run(["--format", "env", "claim", "--agent=ada"], monkeypatch)
    assert code == 1 and out.startswith("unset SHOAL_TASK SHOAL_LEASE; false")
    assert "nothing claimed" in err
    monkeypatch.setenv("SHOAL_AGENT", "ada")
    assert pair.run(["claim", "--json"], monkeypatch)[0] == 1
    monkeypatch.delenv("SHOAL_AGENT")
    assert pair.run(["status", "--json"], monkeypatch)[0] == 0
    assert pair.run(["--json", "status"], monkeypatch)[0] == 0
    assert pair.run(["status", "--format", "json"], monkeypatch)[0] == 0
    assert pair.run(["status"], monkeypatch)[0] == 0  # a pipe: tab-separated
    assert pair.run(["list"], monkeypatch)[0] == 0
    assert pair.run(["list", "--no-header"], monkeypatch)[0] == 0
    assert pair.run(["list", "--json"], monkeypatch)[0] == 0
    assert pair.run(["--format", "tsv", "list", "--format=json"], monkeypatch)[0] == 0
    assert pair.run(["--format", "json", "list", "--format=tsv"], monkeypatch)[0] == 0
    first, second = pair.states()
    assert first == second


def test_errors_are_said_alike_either_way(
    pair: Pair, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    assert pair.run(["claim"], monkeypatch)[0] == 2  # no agent
    assert pair.run(["claim", "--agent", "ghost", "--json"], monkeypatch)[0] == 2
    assert pair.run(["claim", "--agent", "ada", "--wait", "soon"], monkeypatch)[0] == 2
    assert pair.run(["done", "1"], monkeypatch)[0] == 2  # no token
    assert pair.run(["done", "1", "--token", "0123456789abcdef"], monkeypatch)[0] == 3
    assert pair.run(["done", "1", "-t", "nope", "--json"], monkeypatch)[0] == 3
    assert pair.run(["done", "99", "--token", "x"], monkeypatch)[0] == 2
    pair.run(["claim", "--agent", "ada", "--format", "env"], monkeypatch)
    assert pair.run(["done", "--format", "env"], monkeypatch)[0] == 2  # env: for ids only
    for way in ("fast", "click"):  # a lease from the environment, for another task
        pair.env[way]["SHOAL_TASK"] = "3"
    assert pair.run(["done", "2"], monkeypatch)[0] == 2
    code, out, _ = pair.run(["done", "3", "--result", '{"ok": true}', "--json"], monkeypatch)
    assert code == 3 and '"error"' in out
    missing = f"sqlite:///{tmp_path / 'none' / 'fleet.db'}"
    assert pair.run(["--store", missing, "status", "--json"], monkeypatch)[0] != 0
    assert pair.run(["--store", missing, "list"], monkeypatch)[0] != 0
    assert pair.run(["--store=memory://", "claim", "-a", "ada"], monkeypatch)[0] == 2
    monkeypatch.setenv("SHOAL_LOG_LEVEL", "loud")
    assert pair.run(["status", "--json"], monkeypatch)[0] == 2
    first, second = pair.states()
    assert first == second


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--help"],
        ["claim", "--help"],
        ["claim", "-h"],
        ["--version"],
        ["-v", "status"],
        ["status", "--watch"],
        ["claim", "--agent"],
        ["claim", "--agent", "-x"],
        ["claim", "-n", "two"],
        ["claim", "-n", " 2"],
        ["claim", "--bogus"],
        ["claim", "extra"],
        ["claim", "--json=yes"],
        ["done", "abc", "--token", "t"],
        ["done", "1", "2"],
        ["done", "--", "1"],
        ["list", "--state", "done"],
        ["list", "--all"],
        ["status", "--format", "yaml"],
        ["--format", "yaml", "status", "--format", "json"],
        ["--store"],
        ["fail", "1", "--token", "t"],
        ["heartbeat", "ada"],
    ],
)
def test_what_fast_does_not_read_exactly_goes_to_click(args: list[str]) -> None:
    assert fast._plan(args) is None


def test_done_without_a_task_goes_to_click(monkeypatch: pytest.MonkeyPatch) -> None:
    """No TASK_ID and no SHOAL_TASK: click's "Missing argument" (an empty SHOAL_TASK is
    none, as click reads it)."""
    monkeypatch.delenv("SHOAL_TASK", raising=False)
    assert fast._plan(["done", "--token", "t"]) is None
    monkeypatch.setenv("SHOAL_TASK", "")
    assert fast._plan(["done", "--token", "t"]) is None
    monkeypatch.setenv("SHOAL_TASK", "12")
    assert fast._plan(["done", "--token", "t"]) is not None

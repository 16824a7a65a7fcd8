"""Lists never drop rows silently: `shoal list`, `shoal events` and `shoal agents` show a
page, say on stderr how many rows were left out and the command that shows them, and page
through their JSON (still a bare array) by the last id shown -- run as a user runs them, in a
subprocess, against a real SQLite fleet of 61 tasks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from shoal import Fleet
from tests.faces.cli_support import Shoal, shoal, url
from tests.helpers import snapshot

__all__ = ["shoal", "url"]  # the fixtures, imported to be used

TASKS = 61


@pytest.fixture
def fleet(url: str) -> Iterator[Fleet]:
    """The test fleet with 61 tasks and three agents (set up through the Fleet API)."""
    with Fleet.open(url) as opened:
        opened.post_many([{"title": f"task {i}"} for i in range(1, TASKS + 1)])
        for name in ("ada", "bob", "cy"):
            opened.register(name)
        yield opened


def _command_in(err: str) -> list[str]:
    """The command the "more" line on stderr names (between backquotes), as arguments."""
    assert err.count("`") == 2, err
    return err.split("`")[1].split()


def test_a_full_page_says_how_many_more_and_how_to_see_them(shoal: Shoal, fleet: Fleet) -> None:
    first = shoal("list")
    assert first.code == 0, first
    header, *rows = first.out.splitlines()
    assert header.startswith("id\t") and len(rows) == 50
    assert "11 more tasks" in first.err and "--all" in first.err
    command = _command_in(first.err)
    assert command == ["shoal", "list", "--before", "12"]
    rest = shoal(*command[1:])
    assert rest.code == 0 and rest.err == ""  # the last page: nothing more to say
    assert [r.split("\t")[0] for r in rest.out.splitlines()[1:]] == [
        str(i) for i in range(11, 0, -1)
    ]

    every = shoal("list", "--all", "--no-header")
    assert every.code == 0 and every.err == ""
    assert len(every.out.splitlines()) == TASKS  # rows only: `wc -l` counts tasks

    small = shoal("list", "--limit", "61")  # exactly all of them: no note
    assert small.code == 0 and small.err == "" and len(small.out.splitlines()) == TASKS + 1


def test_json_keeps_its_shape_and_pages_by_the_last_id(shoal: Shoal, fleet: Fleet) -> None:
    seen: list[int] = []
    args = ["list", "--json", "--limit", "25", "--state", "pending"]
    while True:
        page = shoal(*args)
        assert page.code == 0, page
        assert isinstance(page.data, list) and len(page.data) <= 25
        seen += [t["id"] for t in page.data]
        if not page.err:
            break
        command = _command_in(page.err)
        assert command[:2] == ["shoal", "list"] and "--json" in command
        assert command[command.index("--state") + 1] == "pending"  # the filter kept
        args = command[1:]
    assert seen == list(range(TASKS, 0, -1))  # every task once, newest first


def test_events_page_forward_from_an_id_and_the_tail_says_what_came_before(
    shoal: Shoal, fleet: Fleet
) -> None:
    ids = [e.id for e in fleet.events(limit=10_000)]
    tail = shoal("events", "-n", "10")
    assert tail.code == 0, tail
    assert len(tail.out.splitlines()) == 11
    assert f"{len(ids) - 10} more events before these" in tail.err
    assert _command_in(tail.err) == ["shoal", "events", "--limit", "10"]

    seen: list[int] = []
    args = ["events", "--json", "--limit", "20"]
    while True:
        page = shoal(*args)
        assert page.code == 0 and isinstance(page.data, list), page
        seen += [e["id"] for e in page.data]
        if not page.err:
            break
        args = _command_in(page.err)[1:]
    assert seen == ids

    every = shoal("events", "--all", "--no-header")
    assert every.code == 0 and every.err == "" and len(every.out.splitlines()) == len(ids)


def test_agents_page_by_id(shoal: Shoal, fleet: Fleet) -> None:
    page = shoal("agents", "--limit", "2", "--json")
    assert page.code == 0, page
    assert [a["id"] for a in page.data] == ["ada", "bob"]
    assert "1 more agents" in page.err
    command = _command_in(page.err)
    assert command[-2:] == ["--after", "bob"]
    rest = shoal(*command[1:])
    assert [a["id"] for a in rest.data] == ["cy"] and rest.err == ""
    assert len(shoal("agents", "--no-header").out.splitlines()) == 3


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["list", "--limit", "0"], "0 is not in the range"),
        (["list", "--limit", "-3"], "-3 is not in the range"),
        (["list", "--before", "x"], "'x' is not a valid integer"),
        (["list", "--before", "-1"], "is not an id"),
        (["list", "--all", "--limit", "5"], "--all and --limit"),
        (["events", "--since", "soon"], "'soon' is not a valid integer"),
        (["events", "--tail", "5", "--limit", "5"], "give one of them"),
        (["events", "--all", "--tail", "5"], "--all and --tail"),
        (["agents", "--after", "not an id!"], "agent id 'not an id!' is not valid"),
        (["agents", "--limit", "-1"], "-1 is not in the range"),
    ],
)
def test_bad_paging_is_refused_in_words_and_changes_nothing(
    shoal: Shoal, fleet: Fleet, args: list[str], says: str
) -> None:
    before = snapshot(fleet)
    result = shoal(*args)
    assert result.code == 2, result
    assert result.out == "" and says in result.err, result
    assert snapshot(fleet) == before

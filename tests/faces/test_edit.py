# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""`shoal edit`, labels on `add`/`list`/`show`, and the manager's `edit_task` over MCP
(issue 31, item 3), through the real clients: the installed script and the MCP SDK."""

from __future__ import annotations

import pytest

from shoal import Fleet
from tests.faces.cli_support import Shoal, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot

pytestmark = pytest.mark.slow


def test_labels_are_posted_listed_and_shown(shoal: Shoal, fleet: Fleet) -> None:
    added = shoal("add", "fix the parser", "--label", "backend", "-l", "good first issue")
    assert added.code == 0, added
    shoal("add", "write the docs", "--label", "docs")
    listed = shoal("list", "--label", "backend", "--json")
    assert [t["title"] for t in listed.data] == ["fix the parser"]
    assert listed.data[0]["labels"] == ["backend", "good first issue"]
    assert shoal("list", "--label", "nothing").out.count("\n") == 1  # the TSV's header
    shown = shoal("show", "1")
    assert "labels" in shown.text and "backend, good first issue" in shown.text


def test_show_says_which_agent_posted_a_task(shoal: Shoal, fleet: Fleet) -> None:
    theirs = fleet.post("an agent's", posted_by="ada").id
    mine = shoal("add", "a person's", "--json").data["id"]
    assert fleet.get(mine).posted_by is None  # the owner's CLI is a person
    assert "posted by" in shoal("show", str(theirs)).text
    assert "ada" in shoal("show", str(theirs)).text
    assert shoal("show", str(theirs), "--json").data["posted_by"] == "ada"


def test_edit_changes_what_it_is_given_and_says_what_changed(shoal: Shoal, fleet: Fleet) -> None:
    task = fleet.post("fix the parsr", skills=["py"], domain="web", labels=["x"]).id
    result = shoal("edit", str(task), "--title", "fix the parser", "-p", "high", "--no-domain")
    assert result.code == 0, result
    assert "task 1 edited: title, priority, domain (fix the parser)" in result.text
    edited = fleet.get(task)
    assert (edited.title, edited.priority, edited.domain) == ("fix the parser", 2, None)
    labelled = shoal("edit", str(task), "--label", "a", "--label", "b", "--json")
    assert labelled.data["labels"] == ["a", "b"] and labelled.data["changed"] == ["labels"]
    (event,) = [e for e in fleet.events(task=task) if e.kind == "edited"][:1]
    assert event.data["changed"]["title"] == {"from": "fix the parsr", "to": "fix the parser"}
    assert "nothing changed" in shoal("edit", str(task), "--label", "a", "-l", "b").text


def test_edit_refuses_with_the_readme_exit_codes_and_changes_nothing(
    shoal: Shoal, fleet: Fleet
) -> None:
    held = fleet.post("held", skills=["py"]).id
    fleet.register("ada", skills=["py"])
    fleet.claim("ada")
    done = fleet.post("gone").id
    fleet.cancel(done)
    before = snapshot(fleet)
    for args, code, words in [
        (["edit", str(held), "--skill", "go"], 3, "held by ada"),
        (["edit", str(done), "--title", "back"], 3, "already cancelled"),
        (["edit", "99", "--title", "who"], 2, "no task 99"),
        (["edit", str(held)], 2, "nothing to change"),
        (["edit", str(held), "--domain", "web", "--no-domain"], 2, "not both"),
        (["edit", str(held), "-p", "urgentest"], 2, "priority"),
        (["edit", str(held), "--label", "a\u202eb"], 2, "label"),
    ]:
        result = shoal(*args)
        assert result.code == code, (args, result)
        assert words in result.text, (args, result.text)
    assert snapshot(fleet) == before
    assert shoal("edit", str(held), "--title", "held, renamed").code == 0


pytest.importorskip("mcp")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_a_manager_edits_over_mcp_and_a_worker_only_what_it_posted(url: str) -> None:
    from tests.faces.mcp_support import call, memory_session, refused

    with Fleet.open(url) as fleet:
        task = fleet.post("parsr", domain="web", expected_duration="1h").id
    async with (
        memory_session(url, "--agent", "boss", "--manager") as boss,
        memory_session(url, "--agent", "ada") as ada,
        memory_session(url, "--agent", "bob") as bob,
    ):
        posted = await call(ada, "add_task", title="labelled", labels=["y"])
        assert posted["task"]["id"] == 2
        assert (await call(ada, "get_task", task_id=2))["task"]["posted_by"] == "ada"
        with Fleet.open(url) as fleet:
            before = snapshot(fleet)
        for who, target in ((ada, task), (bob, 2)):  # a person's task; another agent's
            text = await refused(who, "edit_task", task_id=target, title="mine")
            assert text.startswith("not_yours:") and "nothing was changed" in text
        with Fleet.open(url) as fleet:
            assert snapshot(fleet) == before
        mine = await call(ada, "edit_task", task_id=2, title="relabelled", labels=["z"])
        assert mine["task"]["title"] == "relabelled" and mine["message"] == "task 2 edited"
        done = await call(
            boss, "edit_task", task_id=task, title="parser", labels=["x"], clear=["domain"]
        )
        assert done["task"]["title"] == "parser" and done["message"] == "task 1 edited"
        got = await call(boss, "get_task", task_id=task)
        assert got["task"]["labels"] == ["x"] and got["task"]["domain"] is None
        assert got["task"]["posted_by"] is None
        text = await refused(boss, "edit_task", task_id=task)
        assert text.startswith("bad_input:") and "nothing to change" in text
    with Fleet.open(url) as fleet:
        assert fleet.get(2).labels == ("z",) and fleet.get(2).posted_by == "ada"

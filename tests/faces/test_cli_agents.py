# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""Agents from the command line: ``register`` (and a full fleet's refusal), ``agents``, and
``set-status``.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

from shoal import Fleet, TaskState
from tests.faces.cli_support import Shoal, claim_one, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot

# ---------------------------------------------------------------------- agents


def test_register_reports_the_agent_and_how_many_are_live(shoal: Shoal, fleet: Fleet) -> None:
    first = shoal("register", "ada", "--skill", "python", "--domain", "parsers")
    assert first.code == 0, first
    assert "agent ada registered" in first.text
    assert "1/4" in first.text

    again = shoal(
        "register", "ada", "-s", "python", "-s", "rust", "--max-concurrent", "2", "--json"
    )
    assert again.code == 0, again
    assert again.data["created"] is False
    assert (again.data["live"], again.data["max_agents"]) == (1, 4)
    assert again.data["agent"]["skills"] == ["python", "rust"]
    assert again.data["agent"]["max_concurrent"] == 2

    listed = shoal("agents", "--json")
    assert listed.code == 0
    assert [(a["id"], a["status"]) for a in listed.data] == [("ada", "idle")]
    human = shoal("agents")
    assert "ada" in human.text
    assert "python,rust" in human.text
    assert fleet.agent("ada").incarnation == 1


def test_a_full_fleet_refuses_to_register_with_exit_3_and_says_how_to_raise_the_limit(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.configure(max_agents=2)
    fleet.register("ada")
    fleet.register("bob")
    before = snapshot(fleet)

    human = shoal("register", "carl")
    assert human.code == 3, human
    assert "fleet is full" in human.text
    assert "2 of 2 seats are taken" in human.text
    assert "shoal config set max_agents 3" in human.text

    as_json = shoal("register", "carl", "--json")
    assert as_json.code == 3, as_json
    assert as_json.data["error"]["code"] == "fleet_full"
    assert "max_agents 3" in as_json.data["error"]["hint"]
    assert snapshot(fleet) == before

    manager = shoal("register", "boss", "--manager")  # managers are exempt from the limit
    assert manager.code == 0, manager


# ---------------------------------------------------------------------- agent status


def test_set_status_changes_an_agent_and_terminated_gives_its_work_back(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.post("fix the parser")
    task_id, token = claim_one(shoal, "ada")

    offline = shoal("set-status", "ada", "offline", "--json")
    assert offline.code == 0, offline
    assert offline.data["status"] == "offline"

    before = snapshot(fleet)
    bogus = shoal("set-status", "ada", "asleep")
    assert bogus.code == 2, bogus
    assert "asleep" in bogus.text
    assert snapshot(fleet) == before

    ended = shoal("set-status", "ada", "terminated")
    assert ended.code == 0, ended
    assert "agent ada is terminated" in ended.text
    task = fleet.get(task_id)
    assert (task.state, task.agent) == (TaskState.PENDING, None)
    assert shoal("done", str(task_id), "--token", token).code == 3
    gone = shoal("claim", "--agent", "ada")
    assert gone.code == 2, gone
    assert "terminated" in gone.text


def test_agent_pause_holds_an_agent_until_resume(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("waits for ada")
    paused = shoal("agent", "pause", "ada", "--for", "2h", "--json")
    assert paused.code == 0, paused
    assert paused.data["paused_until"] is not None
    assert shoal("claim", "--agent", "ada").code == 1  # nothing claimed: paused
    before = snapshot(fleet)
    bad = shoal("agent", "pause", "ada", "--for", "forever")
    assert bad.code == 2 and "forever" in bad.text
    assert shoal("agent", "pause", "nobody").code == 2
    assert snapshot(fleet) == before
    assert shoal("agent", "resume", "ada").code == 0
    assert claim_one(shoal, "ada")[0] == 1

# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""The hub's commands: ``status``, ``assess``, ``rebalance``, ``events`` (and ``--follow``)
and ``config``.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable

import pytest

from shoal import Fleet
from tests.faces.cli_support import Result, Shoal, cli, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot

# ---------------------------------------------------------------------- the hub


def test_status_shows_agents_load_and_counts(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.post("fix the parser")
    fleet.post("write the docs")
    fleet.claim("ada")

    human = shoal("status")
    assert human.code == 0, human
    for word in ("agents", "2/4 live", "ada", "bob", "1 fix the parser", "pending 1", "claimed 1"):
        assert word in human.text

    as_json = shoal("status", "--json")
    assert as_json.code == 0
    data = as_json.data
    assert {"at", "agents", "counts", "pool", "capacity", "stalled", "assessment"} <= set(data)
    assert data["counts"]["pending"] == 1
    assert data["counts"]["claimed"] == 1
    assert data["pool"] == 1
    loads = {a["id"]: (a["load"], a["current_tasks"]) for a in data["agents"]}
    assert loads == {"ada": (1, [{"id": 1, "title": "fix the parser"}]), "bob": (0, [])}
    assert data["assessment"] is None


def test_assess_recommends_and_status_keeps_the_last_assessment(
    cli: Callable[..., Result], fleet: Fleet
) -> None:
    fleet.register("ada")
    for i in range(6):
        fleet.post(f"task {i}")

    as_json = cli("assess", "--json")
    assert as_json.code == 0, as_json
    data = as_json.data
    assert data["pending"] == 6
    assert data["live_agents"] == 1
    assert data["workload"] in {"idle", "underutilized", "balanced", "overloaded"}
    assert data["recommendation"] in {"spawn", "terminate_idle", "maintain"}

    human = cli("assess")
    assert human.code == 0
    assert "recommendation" in human.text
    assert data["recommendation"] in human.text

    status = cli("status", "--json")
    assert status.data["assessment"]["recommendation"] == data["recommendation"]
    # Assessed twice to the same verdict: the log says it once (a new one when it changes).
    assert [e.kind for e in fleet.events()].count("assessed") == 1


def test_rebalance_dry_run_shows_the_moves_and_changes_nothing(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    fleet.configure(busy_threshold=1, idle_min_for_rebalance=0)
    for i in range(4):
        fleet.post(f"bob's chore {i}", to="bob", priority=8)
    before = snapshot(fleet)

    dry = shoal("rebalance", "--dry-run", "--json")
    assert dry.code == 0, dry
    assert dry.data["dry_run"] is True
    moves = dry.data["moves"]
    assert moves
    assert all((m["from"], m["to"]) == ("bob", "ada") for m in moves)
    human = shoal("rebalance", "--dry-run")
    assert human.code == 0
    assert "would move" in shoal("rebalance", "--dry-run", "--format", "table").text
    assert snapshot(fleet) == before

    real = shoal("rebalance", "--json")
    assert real.code == 0
    assert real.data["moves"] == moves
    assert {t.id for t in fleet.tasks(agent="ada")} == {m["task_id"] for m in moves}


def test_rebalance_with_nothing_to_move_says_so(cli: Callable[..., Result]) -> None:
    result = cli("rebalance", "--dry-run")
    assert result.code == 0, result
    assert "nothing to rebalance" in result.text


def test_events_filter_by_task_agent_and_since(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.register("bob")
    first = fleet.post("fix the parser").id
    fleet.post("write the docs")
    fleet.claim("ada")
    middle = fleet.events()[2].id

    by_task = shoal("events", "--task", str(first), "--json")
    assert by_task.code == 0, by_task
    assert {e["task_id"] for e in by_task.data} == {first}
    assert [e["kind"] for e in by_task.data] == ["posted", "claimed"]

    by_agent = shoal("events", "--agent", "bob", "--json")
    assert [(e["kind"], e["agent"]) for e in by_agent.data] == [("agent.registered", "bob")]

    since = shoal("events", "--since", str(middle), "--json")
    ids = [e["id"] for e in since.data]
    assert ids
    assert all(i > middle for i in ids)
    assert ids == sorted(ids)  # oldest first

    human = shoal("events")
    assert human.code == 0
    for word in ("agent.registered", "posted", "claimed", "ada"):
        assert word in human.text


# ---------------------------------------------------------------------- settings


def test_config_get_and_set(shoal: Shoal, fleet: Fleet) -> None:
    everything = shoal("config", "get", "--json")
    assert everything.code == 0, everything
    assert everything.data["lease_ttl"] == 600
    assert everything.data["max_agents"] == 4

    one = shoal("config", "get", "lease_ttl")
    assert one.code == 0
    assert one.out.strip() == "10m"  # a duration with its unit, as config set takes it

    changed = shoal("config", "set", "lease_ttl", "15m")
    assert changed.code == 0, changed
    assert "lease_ttl = 15m" in changed.text
    assert shoal("config", "get", "lease_ttl").out.strip() == "15m (default 10m)"
    assert fleet.settings().lease_ttl == 900
    assert fleet.events()[-1].kind == "configured"

    as_json = shoal("--json", "config", "set", "max_agents", "8")
    assert as_json.code == 0
    assert as_json.data == {"max_agents": 8}
    assert shoal("config", "get", "lease_ttl", "--json").data == {"lease_ttl": 900}

    human = shoal("config", "get")
    assert "lease_ttl" in human.text
    assert "how long a claim lasts" in human.text
    assert "longest_first" in human.text or "order" in human.text

    worded = shoal("config", "set", "order", "longest_first")
    assert worded.code == 0, worded
    assert "order = longest_first" in worded.text
    assert shoal("config", "get", "order").out.strip() == "longest_first (default priority)"
    assert fleet.settings().order == "longest_first"
    waited = shoal("--json", "config", "set", "locality_wait", "20m")
    assert waited.data == {"locality_wait": 1200}


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("set", "lease_tt", "5m"), "did you mean lease_ttl"),
        (("get", "lease_tt"), "did you mean lease_ttl"),
        (("set", "lease_ttl", "--", "-5"), "lease_ttl must be"),
        (("set", "lease_ttl", "0"), "lease_ttl must be at least 1"),
        (("set", "max_agents", "lots"), "max_agents must be a whole number"),
        (("set", "steal_min_priority", "12"), "from 1 to 9"),
        (("set", "steal_threshold", "--", "-1"), "steal_threshold must be at least 0"),
        (("set", "domain_wait", "soon"), "domain_wait must be a duration"),
        (("set", "locality_wait", "20 minutes"), "locality_wait must be a duration"),
        (("set", "order", "fastest"), "order must be one of priority, longest_first"),
    ],
)
def test_config_refuses_unknown_names_and_bad_values_with_exit_2(
    shoal: Shoal, fleet: Fleet, args: tuple[str, ...], words: str
) -> None:
    before = snapshot(fleet)
    result = shoal("config", *args)
    assert result.code == 2, result
    assert words in result.text
    assert "hint" in result.text
    assert snapshot(fleet) == before


def test_config_errors_in_json_name_the_setting_problem(cli: Callable[..., Result]) -> None:
    result = cli("--json", "config", "set", "lease_tt", "5m")
    assert result.code == 2
    assert result.data["error"]["code"] == "invalid_setting"
    assert result.data["error"]["hint"] == "did you mean lease_ttl?"


# ---------------------------------------------------------------------- once bugs, now fixed


def test_config_set_a_negative_value_says_what_is_wrong_with_it(
    cli: Callable[..., Result], fleet: Fleet
) -> None:
    before = snapshot(fleet)
    result = cli("config", "set", "lease_ttl", "-5")
    assert result.code == 2, result
    assert snapshot(fleet) == before
    assert "lease_ttl" in result.text, result


def test_assess_does_not_say_now_ago(cli: Callable[..., Result]) -> None:
    result = cli("assess")
    assert result.code == 0, result
    assert "now ago" not in result.text


def test_events_follow_prints_new_events_as_they_happen(shoal: Shoal, fleet: Fleet) -> None:
    fleet.post("before")
    follower = shoal.popen("events", "--follow", "--json")
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["kind"] == "posted" and first["task_id"] == 1
        fleet.post("while following")  # another writer; the follower wakes up and prints it
        second = json.loads(follower.stdout.readline())
        assert second["kind"] == "posted" and second["task_id"] == 2
    finally:
        follower.send_signal(signal.SIGINT)
        follower.wait(timeout=10)
    assert follower.returncode in (0, 130)

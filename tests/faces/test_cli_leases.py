# ruff: noqa: F811 -- the tests take the CLI fixtures as parameters
"""The loop an agent runs from the shell: ``claim`` (waiting, ``-n``, Ctrl-C), ``done``,
``fail``, ``release``, ``defer``, ``heartbeat``, and the tokens and SHOAL_* defaults that
tie them together.

See cli_support.py for how these tests run the CLI."""

from __future__ import annotations

import json
import re
import signal
import time
from collections.abc import Callable

import pytest

from shoal import Fleet, TaskState
from shoal.times import iso_time, parse_moment
from tests.faces.cli_support import Result, Shoal, claim_one, cli, fleet, shoal, url  # noqa: F401 (fixtures)
from tests.helpers import snapshot, wait_until

# ---------------------------------------------------------------------- claiming


def test_claim_json_prints_the_task_and_its_lease_token_at_the_top_level(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    task = fleet.post("fix the parser", priority="high")
    result = shoal("claim", "--agent", "ada", "--json")
    assert result.code == 0, result
    data = result.data
    assert data["task"]["id"] == task.id
    assert data["task"]["state"] == "claimed"
    assert data["task"]["agent"] == "ada"
    assert isinstance(data["lease"]["token"], str)
    assert data["lease"]["token"]
    assert data["lease"]["task_id"] == task.id
    assert data["source"] == "pool"
    assert data["reason"] is None
    assert data["claimed"] == [{"task": data["task"], "lease": data["lease"], "source": "pool"}]
    held = fleet.get(task.id)
    assert (held.state, held.agent) == (TaskState.CLAIMED, "ada")


def test_claim_in_human_form_shows_the_task_and_the_token_to_copy(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.post("fix the parser")
    fleet.post("write the docs")
    result = shoal("claim", "--agent", "ada", "--n", "2")
    assert result.code == 0, result
    assert "claimed task 1" in result.text
    assert "claimed task 2" in result.text
    assert result.text.count("token ") == 2
    tokens = {line.split()[-1] for line in result.out.splitlines() if "token" in line}
    assert len(tokens) == 2


def test_steps_added_to_an_agent_are_claimed_in_the_order_they_were_added(shoal: Shoal) -> None:
    """The report, through the installed script: ada got step 2 first."""
    assert shoal("register", "ada").code == 0
    for step in ("step 1: migrate the database", "step 2: deploy"):
        added = shoal("add", step, "--to", "ada")
        assert added.code == 0, added
    preview = shoal("ready", "--agent", "ada", "--json")
    assert [t["title"] for t in preview.data] == ["step 1: migrate the database", "step 2: deploy"]
    first = shoal("claim", "--agent", "ada", "--json")
    assert first.code == 0, first
    assert first.data["task"]["title"] == "step 1: migrate the database"
    done = shoal("done", str(first.data["task"]["id"]), "--token", first.data["lease"]["token"])
    assert done.code == 0, done
    second = shoal("claim", "--agent", "ada", "--json")
    assert second.data["task"]["title"] == "step 2: deploy"


def test_claim_with_nothing_to_do_exits_1(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    human = shoal("claim", "--agent", "ada")
    assert human.code == 1, human
    assert "nothing claimed" in human.text
    assert "empty" in human.text
    as_json = shoal("claim", "--agent", "ada", "--json")
    assert as_json.code == 1, as_json
    assert as_json.data == {"claimed": [], "reason": "empty", "retry_at": None}
    assert as_json.err == ""
    assert fleet.agent("ada").status.value == "idle"


def test_a_claim_that_passes_over_another_domains_work_says_until_when(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("iris", domains=["research"])  # idle: the paper is left to her
    fleet.register("loom", domains=["ci"])
    paper = fleet.post("paper", domain="research")
    human = shoal("claim", "--agent", "loom")
    assert human.code == 1, human
    assert re.search(r"free to take in (2m|1m 5\ds)", human.text), human.text
    as_json = shoal("claim", "--agent", "loom", "--json")
    retry_at = parse_moment(as_json.data["retry_at"])  # ISO 8601 UTC
    assert retry_at == pytest.approx(paper.created_at + 120, abs=5)


def test_claim_n_takes_several_tasks_and_then_the_agent_is_busy(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=3)
    ids = [fleet.post(f"task {i}").id for i in range(4)]
    result = shoal("claim", "--agent", "ada", "--n", "3", "--json")
    assert result.code == 0, result
    assert "task" not in result.data  # the top-level shortcut is for one task only
    claimed = result.data["claimed"]
    assert len(claimed) == 3
    assert len({c["lease"]["token"] for c in claimed}) == 3
    assert {c["task"]["id"] for c in claimed} <= set(ids)
    assert len(fleet.tasks(state="claimed")) == 3

    busy = shoal("claim", "--agent", "ada", "--json")
    assert busy.code == 1, busy
    assert busy.data == {"claimed": [], "reason": "busy", "retry_at": None, "held": [1, 2, 3]}
    assert "it holds 1, 2, 3" in shoal("claim", "--agent", "ada").text  # why it is busy
    assert len(fleet.tasks(state="pending")) == 1


def test_claim_by_an_unknown_agent_exits_2_and_says_to_register(shoal: Shoal, fleet: Fleet) -> None:
    fleet.post("fix the parser")
    before = snapshot(fleet)
    result = shoal("claim", "--agent", "ghost")
    assert result.code == 2, result
    assert "no agent 'ghost'" in result.text
    assert "shoal register ghost" in result.text
    assert snapshot(fleet) == before


@pytest.mark.parametrize("n", ["0", "1001", "three"])
def test_claim_with_a_bad_n_exits_2_and_claims_nothing(
    cli: Callable[..., Result], fleet: Fleet, n: str
) -> None:
    fleet.register("ada")
    fleet.post("fix the parser")
    before = snapshot(fleet)
    result = cli("claim", "--agent", "ada", "--n", n)
    assert result.code == 2, result
    assert snapshot(fleet) == before


def test_claim_wait_with_no_work_gives_up_after_about_that_long(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    started = time.monotonic()
    result = shoal("claim", "--agent", "ada", "--wait", "0.5", "--json")
    elapsed = time.monotonic() - started
    assert result.code == 1, result
    assert result.data["reason"] == "empty"
    assert 0.5 <= elapsed < 10


def test_claim_wait_returns_as_soon_as_another_process_adds_work(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    seen = fleet.agent("ada").last_seen
    waiter = shoal.popen("claim", "--agent", "ada", "--wait", "30", "--json")
    try:
        # Its first (empty) claim stamps the agent as seen: from then on it is waiting.
        wait_until(lambda: fleet.agent("ada").last_seen > seen, "the claim to start waiting")
        assert waiter.poll() is None
        added = shoal("add", "late work", "--json")
        assert added.code == 0, added
        out, err = waiter.communicate(timeout=20)  # far below the 30 s it would wait
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    assert waiter.returncode == 0, err
    data = json.loads(out)
    assert data["task"]["id"] == added.data["id"]
    assert data["lease"]["token"]
    assert fleet.get(added.data["id"]).state is TaskState.CLAIMED


def test_ctrl_c_during_claim_wait_exits_130_without_a_traceback(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    seen = fleet.agent("ada").last_seen
    waiter = shoal.popen("claim", "--agent", "ada", "--wait", "30")
    try:
        wait_until(lambda: fleet.agent("ada").last_seen > seen, "the claim to start waiting")
        waiter.send_signal(signal.SIGINT)
        _, err = waiter.communicate(timeout=20)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.communicate()
    assert waiter.returncode == 130
    assert "Traceback" not in err


# ---------------------------------------------------------------------- finishing work


def test_done_with_the_token_completes_and_a_second_done_changes_nothing(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.post("fix the parser")
    task_id, token = claim_one(shoal, "ada")

    done = shoal("done", str(task_id), "--token", token, "--result", '{"ok": true}')
    assert done.code == 0, done
    assert f"task {task_id} done" in done.text
    finished = fleet.get(task_id)
    assert finished.state is TaskState.DONE
    assert finished.result == {"ok": True}
    before = snapshot(fleet)

    again = shoal("done", str(task_id), "--token", token, "--result", '{"ok": false}')
    assert again.code == 0, again
    assert "already done" in again.text
    assert "nothing changed" in again.text
    as_json = shoal("done", str(task_id), "--token", token, "--json")
    assert as_json.code == 0
    assert as_json.data["already_done"] is True
    assert as_json.data["task"]["result"] == {"ok": True}
    assert snapshot(fleet) == before


def test_done_with_a_wrong_token_exits_3_lease_lost_and_changes_nothing(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.post("fix the parser")
    task_id, _ = claim_one(shoal, "ada")
    before = snapshot(fleet)

    human = shoal("done", str(task_id), "--token", "0123456789abcdef")
    assert human.code == 3, human
    assert "lease lost" in human.text
    assert "claim a new task" in human.text
    as_json = shoal("done", str(task_id), "--token", "0123456789abcdef", "--json")
    assert as_json.code == 3
    assert as_json.data["error"]["code"] == "lease_lost"
    assert snapshot(fleet) == before
    assert fleet.get(task_id).state is TaskState.CLAIMED


def test_a_token_from_an_earlier_claim_is_stale_after_release_and_reclaim(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.post("fix the parser")
    task_id, old = claim_one(shoal, "ada")

    released = shoal("release", str(task_id), "--token", old)
    assert released.code == 0, released
    assert "released" in released.text
    assert "pending again" in released.text
    back = fleet.get(task_id)
    assert back.state is TaskState.PENDING
    assert back.attempts == 0  # a release is not a failed attempt

    again_id, new = claim_one(shoal, "ada")
    assert again_id == task_id
    assert new != old
    before = snapshot(fleet)
    for verb in ("done", "fail", "release"):
        stale = shoal(verb, str(task_id), "--token", old)
        assert stale.code == 3, (verb, stale)
        assert "lease lost" in stale.text
    assert snapshot(fleet) == before
    assert shoal("done", str(task_id), "--token", new).code == 0


def test_an_expired_lease_is_lost_and_reap_puts_the_task_back(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("quick job", lease_ttl="10ms")  # expires long before the next process starts
    task_id, token = claim_one(shoal, "ada")

    late = shoal("done", str(task_id), "--token", token)
    assert late.code == 3, late
    assert "lease lost" in late.text
    assert "expired" in late.text

    reaped = shoal("reap", "--json")
    assert reaped.code == 0, reaped
    assert reaped.data["expired"] == [task_id]
    parts = {"expired", "dead", "offline", "returned", "terminated", "stalled", "resumed"}
    parts |= {"posted"}  # recurring tasks that fell due
    assert set(reaped.data) == parts
    assert fleet.get(task_id).state is TaskState.PENDING

    quiet = shoal("reap")
    assert quiet.code == 0
    assert "nothing to reap" in quiet.text


def test_fail_retries_the_task_until_max_attempts_then_it_is_dead(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    task = fleet.post("flaky job", max_attempts=2, retry_delay=0)  # retried at once

    task_id, token = claim_one(shoal, "ada")
    first = shoal("fail", str(task_id), "--token", token, "--error", "boom")
    assert first.code == 0, first
    assert "failed" in first.text
    assert "pending" in first.text
    assert fleet.get(task.id).state is TaskState.PENDING

    task_id, token = claim_one(shoal, "ada")
    assert task_id == task.id
    last = shoal("fail", str(task_id), "--token", token, "-e", "boom again", "--json")
    assert last.code == 0, last
    assert last.data["state"] == "dead"
    assert last.data["error"] == "boom again"
    assert last.data["attempts"] == 2
    assert shoal("claim", "--agent", "ada").code == 1  # a dead task is not handed out


def test_fail_no_retry_makes_the_task_dead_at_once(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("hopeless job")
    task_id, token = claim_one(shoal, "ada")
    result = shoal("fail", str(task_id), "--token", token, "--no-retry", "-e", "bad input file")
    assert result.code == 0, result
    assert "dead" in result.text
    assert fleet.get(task_id).state is TaskState.DEAD


def test_defer_blocks_a_task_until_its_children_are_done(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("write the report")
    parent_id, token = claim_one(shoal, "ada")
    child = shoal("add", "gather the data", "--parent", str(parent_id), "--json")
    assert child.code == 0, child
    assert child.data["agent"] == "ada"  # spawned work goes to the spawner's queue
    child_id = child.data["id"]

    deferred = shoal("defer", str(parent_id), "--token", token, "--after", str(child_id), "--json")
    assert deferred.code == 0, deferred
    assert deferred.data["state"] == "blocked"

    got, child_token = claim_one(shoal, "ada")
    assert got == child_id
    done = shoal("done", str(child_id), "--token", child_token)
    assert done.code == 0, done
    assert f"now ready: {parent_id}" in done.text
    parent = fleet.get(parent_id)
    assert (parent.state, parent.agent) == (TaskState.PENDING, "ada")


def test_heartbeat_extends_the_agents_leases(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada")
    fleet.post("long job")
    task_id, token = claim_one(shoal, "ada")
    expires = fleet.get(task_id).lease_expires
    assert expires is not None

    beat = shoal("heartbeat", "ada", "--json")
    assert beat.code == 0, beat
    assert beat.data["agent"] == "ada"
    [lease] = beat.data["leases"]
    assert (lease["task_id"], lease["token"]) == (task_id, token)
    renewed = fleet.get(task_id).lease_expires
    assert renewed is not None and renewed >= expires
    assert lease["expires"] == iso_time(renewed)  # ISO 8601 UTC
    assert 595 <= lease["expires_in_s"] <= 600  # lease_ttl, just renewed

    by_env = shoal("heartbeat", env={"SHOAL_AGENT": "ada"})
    assert by_env.code == 0, by_env
    assert "ada is alive" in by_env.text
    assert "1 lease(s) extended" in by_env.text

    before = snapshot(fleet)
    nobody = shoal("heartbeat")
    assert nobody.code == 2, nobody
    assert "needs an agent" in nobody.text
    assert snapshot(fleet) == before


def test_shoal_agent_and_shoal_token_are_the_defaults_for_agent_and_token(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    fleet.register("bob")
    first = fleet.post("fix the parser", priority=1).id
    second = fleet.post("write the docs", priority=2).id

    claimed = shoal("claim", "--json", env={"SHOAL_AGENT": "ada"})
    assert claimed.code == 0, claimed
    assert claimed.data["task"]["id"] == first
    assert claimed.data["lease"]["agent"] == "ada"
    token = claimed.data["lease"]["token"]

    done = shoal("done", str(first), "--result", "looks good", env={"SHOAL_TOKEN": token})
    assert done.code == 0, done
    assert fleet.get(first).result == "looks good"  # plain text is kept as text

    explicit = shoal("claim", "--agent", "bob", "--json", env={"SHOAL_AGENT": "ada"})
    assert explicit.code == 0
    assert (explicit.data["task"]["id"], explicit.data["lease"]["agent"]) == (second, "bob")

    before = snapshot(fleet)
    no_token = shoal("done", str(second))
    assert no_token.code == 2, no_token
    assert "needs the lease token" in no_token.text
    assert "shoal_token" in no_token.text
    assert snapshot(fleet) == before


# ---------------------------------------------------------------------- once bugs, now fixed


def test_claim_takes_the_short_n_option_like_the_other_commands(
    cli: Callable[..., Result], fleet: Fleet
) -> None:
    fleet.register("ada", max_concurrent=2)
    fleet.post("first")
    fleet.post("second")
    result = cli("claim", "--agent", "ada", "-n", "2", "--json")
    assert result.code == 0, result
    assert len(result.data["claimed"]) == 2

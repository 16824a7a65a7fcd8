"""Agent ids (issue 28, L5): a new agent takes an id of letters, digits and ``. _ - @ :``, at
most 64, so an id is one piece of any URL it goes into; an agent an older version registered
under another id (``team/bob``) keeps working until it is moved."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, TaskState
from tests.helpers import one, plant_agent, snapshot

#: Ids an older shoal took that a new agent may not: a path in a URL, and a long one.
TRAVERSAL = "x/../../agents/bob"
LONG = "a" * 65


@pytest.mark.parametrize(
    "agent_id", [TRAVERSAL, "team/bob", LONG, "..", ".hidden", "-x", "a b", "ada\n", "", "é"]
)
def test_a_new_agent_outside_the_safe_set_is_refused_and_changes_nothing(
    fleet: Fleet, agent_id: str
) -> None:
    fleet.register("bob")
    before = snapshot(fleet)
    with pytest.raises(BadInput) as refused:
        fleet.register(agent_id)
    assert repr(agent_id) in refused.value.message
    assert "letters, digits or . _ - @ :" in (refused.value.hint or "")
    assert snapshot(fleet) == before


def test_every_mark_of_the_safe_set_and_64_characters_register(fleet: Fleet) -> None:
    fleet.configure(max_agents=10)
    for agent_id in ("ada@host-1", "worker_2.eu:7", "B" * 64, "9"):
        assert fleet.register(agent_id).agent.id == agent_id


def test_an_agent_an_older_version_registered_keeps_working_until_it_is_moved(
    fleet: Fleet,
) -> None:
    """Read, shown, routed to, claiming, heartbeating, registering again while it lives,
    terminated; once terminated its id is not taken again."""
    fleet.configure(max_agents=10)
    old = plant_agent(fleet, "team/bob", skills=("py",))
    assert fleet.agent("team/bob") == old
    assert "team/bob" in [a.id for a in fleet.agents()]
    again = fleet.register("team/bob", skills=["py", "sql"])  # its worker restarting
    assert not again.created and again.agent.skills == ("py", "sql")

    queued = fleet.post("for bob", to="team/bob", skills=["py"])
    assert queued.agent == "team/bob"
    assert [t.id for t in fleet.tasks(agent="team/bob")] == [queued.id]
    task, lease = one(fleet.claim("team/bob"))
    assert task.id == queued.id and lease.agent == "team/bob"
    assert [renewed.task_id for renewed in fleet.heartbeat("team/bob")] == [task.id]
    assert fleet.complete(lease, "done").task.state is TaskState.DONE

    long_one = plant_agent(fleet, "L" * 100)
    assert fleet.pause(long_one.id, for_="1h").paused(fleet.clock.now())

    assert fleet.set_status("team/bob", "terminated").status.value == "terminated"
    with pytest.raises(BadInput, match="not valid for a new agent"):
        fleet.register("team/bob")
    assert fleet.agent("team/bob").status.value == "terminated"


def test_an_id_no_version_took_is_refused_even_where_it_only_names_an_agent(
    fleet: Fleet,
) -> None:
    before = snapshot(fleet)
    for agent_id in ("../x", "a" * 129, "x y"):
        with pytest.raises(BadInput, match="agent id"):
            fleet.post("t", to=agent_id)
        with pytest.raises(BadInput, match="agent id"):
            fleet.agent(agent_id)
    assert snapshot(fleet) == before


def test_an_agent_token_is_made_only_for_an_id_an_agent_may_register_under(
    fleet: Fleet,
) -> None:
    before = snapshot(fleet)
    with pytest.raises(BadInput, match="not valid for a new agent"):
        fleet.create_token("agent", agent=TRAVERSAL)
    assert snapshot(fleet) == before and fleet.tokens() == []
    plant_agent(fleet, "team/bob")
    assert fleet.create_token("agent", agent="team/bob")[0].agent == "team/bob"
    assert fleet.create_token("agent", agent="ann@eu-1")[0].agent == "ann@eu-1"

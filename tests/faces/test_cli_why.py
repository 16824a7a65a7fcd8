"""`shoal why TASK` and `shoal why --agent AGENT` through the installed script: every
reason of ``tests.why_cases``, the JSON, untrusted titles shown as text, refusals."""

from __future__ import annotations

import re
import time

import pytest

from shoal import Fleet, ManualClock
from tests.faces.cli_support import Shoal, shoal, url  # noqa: F401  (fixtures)
from tests.why_cases import HOSTILE, Cases, build, build_group

pytestmark = pytest.mark.slow


@pytest.fixture
def cases(url: str) -> Cases:  # noqa: F811
    with Fleet.open(url, clock=ManualClock(time.time())) as fleet:
        return build(fleet, fleet.clock)  # type: ignore[arg-type]


def test_every_reason_of_a_task_and_an_agent(shoal: Shoal, cases: Cases) -> None:  # noqa: F811
    for name, task_id in cases.tasks.items():
        result = shoal("why", str(task_id), "--json")
        assert result.code == 0, result
        codes = [r["code"] for r in result.data["reasons"]]
        assert codes == cases.task_codes[name], (name, result.data)
    for agent, expected in cases.agent_codes.items():
        result = shoal("why", "--agent", agent, "--json")
        assert result.code == 0, result
        assert [r["code"] for r in result.data["reasons"]] == expected, (agent, result.data)
    paper = shoal("why", "--agent", "iris", "--json").data
    assert (paper["next"], paper["step"]) == (cases.tasks["paper"], "pool")


def test_the_words(shoal: Shoal, cases: Cases) -> None:  # noqa: F811
    paper = shoal("why", str(cases.tasks["paper"]), "--format", "table")
    # The fleet's clock stood 2 s past the post; the command runs a moment later in real
    # time, so the 2-minute wait has 1m 5xs or (rounded) 2m left.
    assert "domain_wait" in paper.out and re.search(r"until in (1m \d+s|2m)\)", paper.out), paper
    assert "next: iris (idle) could take it from the pool" in paper.out
    go = shoal("why", str(cases.tasks["go"]), "--format", "table")
    assert HOSTILE in go.out  # shown as text: the markup is not obeyed
    assert "missing_skills" in go.out and ": go;" in go.out
    loom = shoal("why", "--agent", "loom")
    assert "kept_for_domains" in loom.out and "need go" in loom.out
    empty = shoal("claim", "--agent", "loom")  # an empty claim points at why
    assert empty.code == 1 and "shoal why --agent" in empty.text


def test_a_full_group(shoal: Shoal, url: str) -> None:  # noqa: F811
    with Fleet.open(url, clock=ManualClock(time.time())) as fleet:
        case = build_group(fleet, fleet.clock)  # type: ignore[arg-type]
    task = shoal("why", str(case.waiting), "--json")
    assert task.code == 0, task
    (reason,) = task.data["reasons"]
    assert reason["code"] == "group_full" and task.data["takers"] == []
    assert (reason["agents"], reason["tasks"]) == ([case.agent], [case.holder])
    assert reason["until"] is not None  # the holder's lease expiry bounds it
    assert "prod is full: 1 held of max 1" in reason["text"]
    agent = shoal("why", "--agent", case.agent, "--json").data
    assert [r["code"] for r in agent["reasons"]] == ["group_full"] and agent["next"] is None
    words = shoal("why", str(case.waiting), "--format", "table")
    assert "group_full" in words.out and f"#{case.holder} on {case.agent}" in words.out


def test_refusals_change_nothing(shoal: Shoal, cases: Cases, url: str) -> None:  # noqa: F811
    with Fleet.open(url) as fleet:
        before = fleet.events(limit=1000)
    assert shoal("why", "999").code == 2
    assert shoal("why", "--json", "999").data["error"]["code"] == "unknown_task"
    assert shoal("why", "--agent", "nobody", "--json").data["error"]["code"] == "unknown_agent"
    assert shoal("why").code == 2
    assert shoal("why", "3", "--agent", "ada").code == 2
    with Fleet.open(url) as fleet:
        assert fleet.events(limit=1000) == before

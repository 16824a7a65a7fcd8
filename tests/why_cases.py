"""One small fleet with a task or an agent held back by each of ``why``'s reasons, for the
tests of every face (CLI, MCP, HTTP): the same cases, the same expected codes."""

from __future__ import annotations

from dataclasses import dataclass

from shoal import Fleet, ManualClock

#: A title a face must show as text: rich markup and HTML, neither obeyed.
HOSTILE = "[bold red]needs go[/bold red] <b>go</b>"


@dataclass(frozen=True)
class Cases:
    """Task ids by case, and the codes ``why`` must give each task and agent."""

    tasks: dict[str, int]
    task_codes: dict[str, list[str]]
    agent_codes: dict[str, list[str]]


def build(fleet: Fleet, clock: ManualClock) -> Cases:
    """iris and loom both have research, of domains research and ci; ada (py) is busy; pam
    (rust) is paused. Each task waits for one reason."""
    fleet.configure(domain_wait=120)
    fleet.register("iris", skills="research", domains="research")
    fleet.register("loom", skills="research", domains="ci")
    fleet.register("ada", skills="py")
    fleet.register("pam", skills="rust")
    t = {}
    t["run"] = fleet.post("running", skills=["py"]).id
    assert fleet.claim("ada").grants
    t["paper"] = fleet.post("paper", domain="research", skills=["research"]).id
    t["go"] = fleet.post(HOSTILE, skills=["go"]).id
    t["blocked"] = fleet.post("after the paper", after=[t["paper"]], skills=["research"]).id
    t["later"] = fleet.post("later", not_before=clock.now() + 3600, skills=["research"]).id
    t["pinned"] = fleet.post("ada's own", to="ada", pinned=True, skills=["py"]).id
    t["py"] = fleet.post("py work", skills=["py"]).id
    t["rust"] = fleet.post("rust work", skills=["rust"]).id
    fleet.pause("pam", for_=600)
    clock.advance(2)
    return Cases(
        tasks=t,
        task_codes={
            "run": ["running"],
            "paper": ["domain_wait"],
            "go": ["missing_skills"],
            "blocked": ["dependencies"],
            "later": ["not_before"],
            "pinned": ["pinned"],
            "py": ["agents_busy"],
            "rust": ["missing_skills", "agents_paused"],
        },
        agent_codes={
            "loom": [
                *["no_skill_fit"] * 3,
                *["kept_for_domains", "not_ready", "nothing_to_steal"],
            ],
            "ada": ["capacity"],
            "pam": ["paused"],
            "iris": [],
        },
    )


@dataclass(frozen=True)
class GroupCase:
    """A task its full concurrency group holds back, the task that holds the group, and
    the agent (room to spare) whose only candidate the group holds back."""

    waiting: int
    holder: int
    agent: str


def build_group(fleet: Fleet, clock: ManualClock) -> GroupCase:
    """gus (deploy, two seats) holds the one place of group prod; a second prod task waits."""
    fleet.register("gus", skills="deploy", max_concurrent=2)
    fleet.set_group("prod", 1)
    holder = fleet.post("first deploy", skills=["deploy"], group="prod").id
    assert fleet.claim("gus").grants
    waiting = fleet.post("second deploy", skills=["deploy"], group="prod").id
    clock.advance(2)
    return GroupCase(waiting, holder, "gus")

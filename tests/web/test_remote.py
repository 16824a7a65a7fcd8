"""`shoal --store http://HUB ...`: an agent with no access to the fleet's database works
through a real `shoal serve` process, as from a host elsewhere. Each refusal must print the
same error and exit with the same code as on a local fleet (README, "Exit codes"); a hub
that is down is exit 4, naming it.

One hub serves the module (starting one costs seconds); each test works with agents of its
own. The agent's side runs as the real `shoal` script in processes of its own where the
process matters (claim, done, worker, a hub gone); the many refusals run the same CLI
(``main``) in this process, against the same real server.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from shoal import Fleet, TaskState
from shoal.faces.cli import main
from tests.faces.cli_support import ENV_NAMES, Result, Shoal
from tests.web.remote_support import Tokens, make_tokens, served, stop

pytestmark = pytest.mark.slow

AGENTS = ("ada", "cy", "dee", "eve", "w1")


class Hub:
    """A running `shoal serve` on its own fleet, with the fleet opened here too."""

    def __init__(self, url: str, fleet: Fleet, tokens: Tokens, agents: dict[str, str]) -> None:
        self.url, self.fleet, self.tokens, self.agents = url, fleet, tokens, agents


def start_hub(store: str, folder: Path) -> Iterator[Hub]:
    with Fleet.open(store) as fleet:
        fleet.configure(max_agents=20, idle_timeout="1s")
        tokens, agents = make_tokens(fleet, *AGENTS)
        with served(store, folder) as (url, _proc):
            yield Hub(url, fleet, tokens, agents)


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """The module's hub, on a SQLite fleet."""
    folder = tmp_path_factory.mktemp("hub")
    store = f"sqlite://{folder / 'fleet.db'}"
    Fleet.init(store).close()
    yield from start_hub(store, folder)


def elsewhere(hub: Hub, tmp_path: Path, token: str) -> Shoal:
    """`shoal` in a folder with no fleet, aimed at the hub with ``token``."""
    work = tmp_path / "elsewhere"
    work.mkdir(exist_ok=True)
    return Shoal(work, {"SHOAL_STORE": hub.url, "SHOAL_API_TOKEN": token})


@pytest.fixture
def cli(
    hub: Hub, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Result]:
    """`shoal --store HUB ARGS...` in this process, with ``token`` as $SHOAL_API_TOKEN."""
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")

    def run(*args: str, token: str | None = None) -> Result:
        if token is None:
            monkeypatch.delenv("SHOAL_API_TOKEN", raising=False)
        else:
            monkeypatch.setenv("SHOAL_API_TOKEN", token)
        with pytest.raises(SystemExit) as stop:
            main(["--store", hub.url, *args])
        captured = capsys.readouterr()
        return Result(int(stop.value.code or 0), captured.out, captured.err)

    return run


def refused(result: Result, exit_code: int, code: str) -> dict[str, str]:
    assert result.code == exit_code, result
    error: dict[str, str] = result.data["error"]
    assert error["code"] == code, error
    return error


def work_one_task(shoal: Shoal, fleet: Fleet, agent: str) -> None:
    """What an agent does from the shell: register, add, claim, look, heartbeat, done."""
    assert shoal("register", agent, "--skill", "python").code == 0
    added = shoal("add", f"fix the parser for {agent}", "--skill", "python", "-p", "high", "--json")
    assert added.code == 0, added
    task_id = added.data["id"]
    assert fleet.get(task_id).priority == 2

    claimed = shoal("claim", "--agent", agent, "--json")
    assert claimed.code == 0, claimed
    assert claimed.data["task"]["id"] == task_id
    token = claimed.data["lease"]["token"]
    assert fleet.get(task_id).state is TaskState.CLAIMED

    # What the agent reads through the hub is what the fleet holds.
    shown = shoal("show", str(task_id), "--json")
    assert shown.data == fleet.show(task_id).to_dict()

    done = shoal("done", str(task_id), "--token", token, "--result", '{"ok": true}', "--json")
    assert done.code == 0, done
    assert done.data["task"]["state"] == "done"
    assert fleet.get(task_id).result == {"ok": True}


def test_an_agent_registers_claims_and_finishes_a_task_through_the_hub(
    hub: Hub, tmp_path: Path, cli: Callable[..., Result]
) -> None:
    work_one_task(elsewhere(hub, tmp_path, hub.agents["ada"]), hub.fleet, "ada")
    token = hub.agents["ada"]
    listed = cli("list", "--agent", "ada", "--json", token=token)
    assert listed.data == [t.to_dict() for t in hub.fleet.tasks(agent="ada", limit=50)]
    # Nothing left for ada: exit 1, as on a local fleet.
    assert cli("claim", "--agent", "ada", token=token).code == 1
    assert cli("ready", "--agent", "ada", "--json", token=token).data == [
        t.to_dict() for t in hub.fleet.ready("ada")
    ]


def test_refusals_exit_with_the_codes_of_a_local_fleet(
    hub: Hub, cli: Callable[..., Result]
) -> None:
    fleet, cy = hub.fleet, hub.agents["cy"]
    fleet.register("cy", skills=["cy-only"])
    fleet.register("dee", skills=["dee-only"])
    task = fleet.post("held by cy", skills=["cy-only"])
    lease = fleet.claim("cy").leases[0]
    before = fleet.events(newest=True, limit=1)[-1].id

    refused(cli("--json", "add", "x", "-p", "urgent", token=cy), 2, "invalid_priority")
    refused(cli("--json", "show", "999999", token=cy), 2, "unknown_task")
    refused(cli("--json", "done", str(task.id), "--token", "0" * 16, token=cy), 3, "lease_lost")
    # An agent token acts as its own agent only (README: bad input, exit 2)...
    foreign = refused(cli("--json", "claim", "--agent", "dee", token=cy), 2, "foreign_agent")
    assert "cy" in foreign["message"]
    # ... and settles only its own agent's leases, even with another's lease token.
    deed = fleet.post("dee's", skills=["dee-only"])
    dees = fleet.claim("dee").leases[0]
    refused(cli("--json", "done", str(deed.id), "--token", dees.token, token=cy), 3, "lease_lost")
    # The people's actions need an admin token; a viewer only reads.
    refused(cli("--json", "cancel", str(task.id), token=cy), 2, "forbidden")
    refused(cli("--json", "claim", "--agent", "cy", token=hub.tokens.viewer), 2, "forbidden")
    # No token, or one the hub does not know: say which variable to set.
    for token in (None, "shoal_not_a_token"):
        error = refused(cli("--json", "list", token=token), 2, "unauthorized")
        assert "SHOAL_API_TOKEN" in error["message"] + error["hint"]
    human = cli("list")
    assert human.code == 2
    assert "shoal token create" in human.text
    # A verb with no route says so.
    defer = ("--json", "defer", str(task.id), "--token", lease.token, "--after", str(deed.id))
    refused(cli(*defer, token=cy), 2, "not_over_http")

    # None of that changed anything but dee's claim.
    assert fleet.get(task.id).state is TaskState.CLAIMED
    assert [e.kind for e in fleet.events(before)] == ["posted", "claimed"]
    assert cli("cancel", str(task.id), token=hub.tokens.admin).code == 0
    assert fleet.get(task.id).state is TaskState.CANCELLED


def test_the_exit_codes_hold_in_a_process_of_its_own(hub: Hub, tmp_path: Path) -> None:
    hub.fleet.register("eve", skills=["eve-only"])
    task = hub.fleet.post("eve's", skills=["eve-only"])
    hub.fleet.claim("eve")
    shoal = elsewhere(hub, tmp_path, hub.agents["eve"])
    assert shoal("show", "999999").code == 2
    assert shoal("release", str(task.id), "--token", "0" * 16).code == 3
    assert shoal("claim", "--agent", "ada").code == 2  # eve's token, ada's claim
    assert hub.fleet.get(task.id).state is TaskState.CLAIMED


def test_a_worker_runs_shell_tasks_to_done_through_the_hub(hub: Hub, tmp_path: Path) -> None:
    fleet = hub.fleet
    ids = [fleet.post(f"task {i}", skills=["shell"], payload={"n": i}).id for i in range(5)]
    worker = elsewhere(hub, tmp_path, hub.agents["w1"])
    command = ("sh", "-c", 'printf %s "$1"', "sh", "{id}-{title}")
    result = worker("worker", "--agent", "w1", "--skill", "shell", "--ephemeral", "--", *command)
    assert result.code == 0, result
    for task_id in ids:
        task = fleet.get(task_id)
        assert task.state is TaskState.DONE, task
        assert task.agent == "w1"
        assert task.result == f"{task_id}-{task.title}"
    assert fleet.agent("w1").status.value == "terminated"


def test_on_postgresql_and_then_with_the_hub_stopped(postgres_url: str, tmp_path: Path) -> None:
    """The same agent's work on a PostgreSQL fleet; then the hub stops: exit 4, naming it."""
    with Fleet.open(postgres_url) as fleet:
        fleet.configure(max_agents=20)
        tokens, agents = make_tokens(fleet, "pg")
        with served(postgres_url, tmp_path) as (url, proc):
            hub = Hub(url, fleet, tokens, agents)
            shoal = elsewhere(hub, tmp_path, agents["pg"])
            work_one_task(shoal, fleet, "pg")
            stop(proc)
            down = refused(shoal("--json", "claim", "--agent", "pg"), 4, "store_unavailable")
            assert url in down["message"]
            assert "shoal serve" in down["hint"]

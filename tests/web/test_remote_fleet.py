"""``RemoteFleet`` against the real web app under uvicorn in a thread, on every store.

A remote fleet must be indistinguishable from the local one to its callers: the same
values (compared through ``to_dict``, which is what every face shows), the same error
classes for the same refusals, a long-polling claim that outlasts the read timeout, and
``wait_for_change`` that notices the hub's fleet change.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

from shoal import Fleet, TaskState
from shoal.errors import (
    BadInput,
    InvalidPriority,
    InvalidStoreURL,
    LeaseLost,
    StoreError,
    StoreUnavailable,
    UnknownAgent,
    UnknownTask,
)
from shoal.model import Lease
from shoal.remote.client import (
    ApiClient,
    Forbidden,
    ForeignAgent,
    NotOverHTTP,
    Unauthorized,
    base_url,
)
from shoal.remote.fleet import RemoteFleet
from shoal.runtime import Worker
from tests.helpers import plant_agent, wait_until
from tests.web.remote_support import Tokens, free_port, hub_thread, make_tokens


class Pair:
    """The hub's fleet (local) and the same fleet through the hub, as ada and as admin."""

    def __init__(self, local: Fleet, url: str, tokens: Tokens) -> None:
        self.local, self.url, self.tokens = local, url, tokens
        self.ada = RemoteFleet.open(url, token=tokens.ada)
        self.admin = RemoteFleet.open(url, token=tokens.admin)

    def close(self) -> None:
        self.ada.close()
        self.admin.close()


@pytest.fixture
def pair(store_url: str) -> Iterator[Pair]:
    with Fleet.open(store_url) as local:
        tokens, _ = make_tokens(local)
        with hub_thread(local) as url:
            both = Pair(local, url, tokens)
            yield both
            both.close()


def without(data: dict[str, Any], *names: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in names}


def test_the_verbs_give_the_values_of_the_local_fleet(pair: Pair) -> None:
    local, ada, admin = pair.local, pair.ada, pair.admin
    reg = ada.register("ada", skills="python,sql", domains=["code"], max_concurrent=2)
    assert reg.created
    assert reg.agent.to_dict() == local.agent("ada").to_dict()
    assert reg.agent.skills == ("python", "sql")
    first = ada.post("first", payload={"k": [1, 2]}, skills=["python"], priority="high",
                     key="k-1", expected_duration="5m", lease_ttl=120)  # fmt: skip
    second = ada.post("second", after=[first.id], body="text")
    assert ada.by_key("k-1") == first
    assert ada.by_key("nobody") is None
    assert ada.post("again", key="k-1") == first
    for task_id in (first.id, second.id):
        assert ada.get(task_id).to_dict() == local.get(task_id).to_dict()
        assert ada.show(task_id).to_dict() == local.show(task_id).to_dict()
    assert [t.to_dict() for t in ada.tasks()] == [t.to_dict() for t in local.tasks()]
    assert [t.id for t in ada.tasks(state=TaskState.BLOCKED)] == [second.id]
    assert [t.to_dict() for t in ada.ready("ada")] == [t.to_dict() for t in local.ready("ada")]

    claim = ada.claim("ada")
    assert claim.tasks[0].id == first.id
    assert claim.tasks[0].state is TaskState.CLAIMED
    assert claim.sources == ("pool",)
    token = claim.leases[0].token
    assert [lease.token for lease in ada.leases("ada")] == [token]
    # The hub's heartbeat hides tokens; the remote fleet fills them in, as a caller needs.
    assert [(lease.task_id, lease.token) for lease in ada.heartbeat("ada")] == [(first.id, token)]
    assert ada.agent("ada").to_dict() == local.agent("ada").to_dict()
    assert [a.to_dict() for a in ada.agents()] == [a.to_dict() for a in local.agents()]
    assert without(ada.status().to_dict(), "at") == without(local.status().to_dict(), "at")

    done = ada.complete(claim.leases[0], {"ok": True}, then_claim=1)
    assert done.task.state is TaskState.DONE
    assert done.released == (second.id,)
    assert done.next is not None
    assert done.next.tasks[0].id == second.id
    assert ada.complete(claim.leases[0]).already_done
    failed = ada.fail(done.next.leases[0], "broke", retry=False)
    assert failed.state is TaskState.DEAD
    assert failed.to_dict() == local.get(second.id).to_dict()
    assert admin.retry(second.id).state is TaskState.PENDING
    again = ada.claim("ada")
    assert ada.release(again.leases[0]).to_dict() == local.get(second.id).to_dict()
    assert local.get(second.id).state is TaskState.PENDING
    assert ada.leases("ada") == []
    assert admin.cancel(second.id).state is TaskState.CANCELLED

    assert ada.settings() == local.settings()
    assert admin.configure(lease_ttl="15m").lease_ttl == 900.0 == local.settings().lease_ttl
    assert [e.to_dict() for e in ada.events()] == [e.to_dict() for e in local.events()]
    tail = [e.to_dict() for e in local.events(2, limit=3, newest=True)]
    assert [e.to_dict() for e in ada.events(2, limit=3, newest=True)] == tail
    assert admin.assess().workload == local.status().assessment.workload  # type: ignore[union-attr]
    assert admin.reap().to_dict() == local.reap().to_dict()
    assert admin.rebalance(dry_run=True) == []
    # An agent id with a slash (an older version's) travels in the path, quoted; a new
    # agent may not take one.
    plant_agent(local, "team/cy")
    assert admin.register("team/cy").agent.id == admin.agent("team/cy").id == "team/cy"
    with pytest.raises(BadInput, match="not valid for a new agent"):
        admin.register("team/dee")
    assert ada.set_status("ada", "offline").status.value == "offline"
    assert admin.resume("ada").id == "ada"
    paused = admin.pause("ada", for_="2h")
    assert paused.to_dict() == local.agent("ada").to_dict() and paused.paused_until
    assert admin.resume("ada").paused_until is None
    third = admin.post("third", priority="low")
    assert admin.set_priority(third.id, "critical").to_dict() == local.get(third.id).to_dict()
    assert local.get(third.id).priority == 1


def test_refusals_raise_the_errors_of_the_local_fleet(pair: Pair) -> None:
    local, ada = pair.local, pair.ada
    local.register("ada")
    local.register("bob")
    task = local.post("held")
    lease = local.claim("ada").leases[0]
    before = local.events()

    with pytest.raises(LeaseLost):
        ada.complete(Lease(task.id, "ada", "0" * 16, 0.0))
    with pytest.raises(UnknownTask):
        ada.get(999_999)
    with pytest.raises(UnknownAgent):
        pair.admin.agent("nobody")
    with pytest.raises(InvalidPriority) as bad:
        ada.post("x", priority="urgent")
    assert bad.value.hint  # the hub's hint comes along
    with pytest.raises(ForeignAgent):
        ada.claim("bob")
    with pytest.raises(Forbidden, match="admin"):
        ada.cancel(task.id)
    with pytest.raises(Unauthorized, match="SHOAL_API_TOKEN"):
        RemoteFleet.open(pair.url, token="shoal_wrong").tasks()
    with pytest.raises(NotOverHTTP):
        ada.post_many([{"title": "a"}, {"title": "b"}])
    with pytest.raises(NotOverHTTP):
        ada.defer(lease, [task.id])
    with pytest.raises(NotOverHTTP):
        ada.prune("1d")
    assert not ada.prune()  # nothing asked (no history_retention): nothing to refuse
    with pytest.raises(NotOverHTTP):
        pair.admin.tokens()
    assert local.events() == before
    assert local.get(task.id).state is TaskState.CLAIMED


@pytest.mark.parametrize("store_kind", ["sqlite"])  # the waiting is the hub's Fleet.claim
def test_a_long_poll_claim_outlasts_the_read_timeout_and_takes_new_work(pair: Pair) -> None:
    pair.local.register("ada")
    # A read timeout of two seconds, a wait of three: the claim's wait must be added to it.
    impatient = RemoteFleet(ApiClient(pair.url, pair.tokens.ada, timeout=2.0))
    began = time.monotonic()
    empty = impatient.claim("ada", wait=3.0)
    assert not empty
    assert empty.reason == "empty"
    assert time.monotonic() - began >= 2.9
    got: list[Any] = []
    waiting = threading.Thread(target=lambda: got.append(impatient.claim("ada", wait=30)))
    waiting.start()
    task = pair.local.post("comes later")
    waiting.join(timeout=20)
    assert got
    assert got[0].tasks[0].id == task.id
    impatient.close()


def test_wait_for_change_notices_the_hubs_fleet_change(pair: Pair) -> None:
    ada = pair.ada
    assert ada.wait_for_change(0.0) is False  # the first look only finds where the log is
    assert ada.wait_for_change(0.3) is False
    pair.local.post("news")
    assert wait_until(lambda: ada.wait_for_change(0.5), "the change to be seen")
    assert ada.wait_for_change(0.3) is False


def test_a_hub_that_does_not_answer_is_store_unavailable_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(StoreUnavailable, match=url) as down:
        RemoteFleet.open(url).status()
    assert down.value.hint is not None
    assert "shoal serve" in down.value.hint


def test_hub_urls() -> None:
    assert base_url("http://hub:8765/") == "http://hub:8765"
    assert base_url("https://hub/shoal/api/v1/") == "https://hub/shoal"
    for bad in ("http://", "ftp://hub", "http://hub:8765/?x=1"):
        with pytest.raises(InvalidStoreURL):
            base_url(bad)


def test_import_shoal_does_not_load_httpx() -> None:
    code = (
        "import sys, shoal, shoal.remote, shoal.faces.cli.root; "
        "assert 'httpx' not in sys.modules, 'httpx was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_python_worker_works_through_the_hub_and_fails_a_dead_workers_leftover(
    pair: Pair,
) -> None:
    """The runtime's Worker on a RemoteFleet: a lease ada still holds from a worker of hers
    that died is failed at start (its token comes from the heartbeat), then the pool's
    tasks are run to done, and the worker leaves once idle."""
    local = pair.local
    # A failed leftover waits an hour before its retry: the worker must not take it again.
    local.configure(idle_timeout="1s", retry_delay="1h")
    local.register("ada")
    leftover = local.post("left by a dead worker")
    local.claim("ada")
    todo = [local.post(f"job {i}", payload=i).id for i in range(3)]
    worker = Worker(pair.ada, "ada", lambda ctx: ctx.task.payload * 10, ephemeral=True)
    report = worker.run()
    assert report.reason == "idle"
    assert report.done == 3
    assert local.get(leftover.id).attempts == 1
    assert local.get(leftover.id).error is not None
    assert [local.get(i).result for i in todo] == [0, 10, 20]
    assert local.agent("ada").status.value == "terminated"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_a_route_the_hub_lacks_says_to_match_versions(pair: Pair) -> None:
    client = ApiClient(pair.url, pair.tokens.admin)
    with pytest.raises(StoreError, match="/api/v1/no-such-route") as lacking:
        client.get("/no-such-route")
    assert "shoal --version" in (lacking.value.hint or "")
    client.close()

"""``GET /metrics``: what Prometheus reads matches what the fleet did, on SQLite and PostgreSQL.

Each test drives a real fleet through ``Fleet``, scrapes the real app through FastAPI's
TestClient, and parses the answer with prometheus_client's own parser, as Prometheus would.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

from shoal import Fleet, ManualClock, __version__
from shoal.faces.exposure import Exposure, allowed_hosts
from shoal.faces.web.app import create_app
from shoal.faces.web.metrics import TOP_DOMAINS, TOP_QUEUES
from tests.web.dash_support import OWNER

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def fleet(shared_store: tuple[str, str], clock: ManualClock) -> Iterator[Fleet]:
    _, url = shared_store
    with Fleet.open(url, clock=clock, rng=random.Random(0)) as opened:
        yield opened


def client_of(fleet: Fleet) -> TestClient:
    """The whole app over ``fleet``, served on loopback; its counters start now."""
    exposure = Exposure("127.0.0.1", 8765, None, allowed_hosts("127.0.0.1", ["testserver"]))
    client = TestClient(create_app(fleet, exposure, local_secret=OWNER))
    client.headers["Authorization"] = f"Bearer {OWNER}"  # the owner of an open fleet
    return client


def scrape(client: TestClient, token: str | None = None) -> Samples:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = client.get("/metrics", headers=headers)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, frozenset(labels.items()))]


def test_the_figures_match_what_the_fleet_did(fleet: Fleet, clock: ManualClock) -> None:
    """Post 5, claim 3 from the pool and one by a steal, complete 2, fail one to dead."""
    fleet.register("ada", max_concurrent=5)
    fleet.register("iris", domains=["research"], max_concurrent=1)
    fleet.set_status("iris", "working")
    fleet.post("before the server")  # logged before the app: not counted
    fleet.claim("ada")
    client = client_of(fleet)
    fleet.register("spark", domains=["research"], max_concurrent=5)  # idle from now
    assert not fleet.claim("spark")
    for i in range(3):
        fleet.post(f"pool {i}")
    fleet.post_many([{"title": f"iris {i}", "to": "iris", "domain": "research"} for i in (1, 2)])
    clock.advance(7)
    first = fleet.claim("ada", 3)
    assert first.sources == ("pool",) * 3
    stolen = fleet.claim("spark")
    assert stolen.sources == ("steal",)
    for lease in first.leases[:2]:
        fleet.complete(lease)
    fleet.fail(first.leases[2], "broken", retry=False)

    got = scrape(client)
    assert value(got, "shoal_tasks_posted_total") == 5
    assert value(got, "shoal_tasks_claimed_total", source="pool") == 3
    assert value(got, "shoal_tasks_claimed_total", source="steal") == 1
    assert value(got, "shoal_tasks_claimed_total", source="queue") == 0
    assert value(got, "shoal_tasks_stolen_total", by="claim") == 1
    assert value(got, "shoal_tasks_completed_total") == 2
    assert value(got, "shoal_tasks_failed_total", outcome="dead") == 1
    assert value(got, "shoal_tasks_failed_total", outcome="retry") == 0
    assert value(got, "shoal_tasks_dead_total", cause="failed") == 1
    # the four claims each waited 7 s since their task was posted
    assert value(got, "shoal_claim_wait_seconds_count") == 4
    assert value(got, "shoal_claim_wait_seconds_sum") == pytest.approx(28)
    assert value(got, "shoal_claim_wait_seconds_bucket", le="5.0") == 0
    assert value(got, "shoal_claim_wait_seconds_bucket", le="15.0") == 4
    # spark, registered (so idle) once the server had started, stole 7 s later
    assert value(got, "shoal_idle_to_claim_seconds_count") == 1
    assert value(got, "shoal_idle_to_claim_seconds_sum") == pytest.approx(7)
    # the gauges: the whole fleet now, the task from before the server included
    assert value(got, "shoal_tasks", state="pending") == 1  # iris's last queued task
    assert value(got, "shoal_tasks", state="claimed") == 2  # ada's first, spark's steal
    assert value(got, "shoal_tasks", state="done") == 2
    assert value(got, "shoal_tasks", state="dead") == 1
    assert value(got, "shoal_queue_depth", agent="iris") == 1
    assert value(got, "shoal_pool_depth") == 0
    assert value(got, "shoal_agents", status="working") == 3
    assert value(got, "shoal_agents", status="idle") == 0
    assert value(got, "shoal_agents_live") == 3
    assert value(got, "shoal_leases") == 2
    assert value(got, "shoal_assessment_recommendation", recommendation="spawn") == 0
    assert value(got, "shoal_build_info", version=__version__) == 1
    assert value(got, "shoal_scrape_duration_seconds") > 0


def test_a_second_scrape_counts_only_new_events(fleet: Fleet) -> None:
    fleet.register("ada", max_concurrent=5)
    client = client_of(fleet)
    fleet.post("one")
    fleet.complete(fleet.claim("ada").leases[0])
    first = scrape(client)
    assert value(first, "shoal_tasks_completed_total") == 1
    again = scrape(client)
    assert value(again, "shoal_tasks_completed_total") == 1
    assert value(again, "shoal_tasks_claimed_total", source="pool") == 1
    assert value(again, "shoal_events_read_total") == value(first, "shoal_events_read_total")
    fleet.post("two", to="ada")
    fleet.complete(fleet.claim("ada").leases[0])
    fleet.assess()
    third = scrape(client)
    assert value(third, "shoal_tasks_completed_total") == 2
    assert value(third, "shoal_tasks_claimed_total", source="queue") == 1
    assert value(third, "shoal_tasks_claimed_total", source="pool") == 1
    advice = fleet.status().assessment
    assert advice is not None
    for word in ("spawn", "terminate_idle", "maintain"):
        expected = 1 if word == advice.recommendation else 0
        assert value(third, "shoal_assessment_recommendation", recommendation=word) == expected


def test_a_backlog_is_read_over_several_scrapes(fleet: Fleet) -> None:
    """Each scrape reads a bounded batch of events; the rest waits for the next scrape."""
    client = client_of(fleet)
    client.app.state.metrics.collector.batch = 4  # type: ignore[attr-defined]
    fleet.post_many([{"title": f"t{i}"} for i in range(10)])
    seen = [value(scrape(client), "shoal_tasks_posted_total") for _ in range(4)]
    assert seen == [4, 8, 10, 10]


def test_expired_leases_and_rebalance_steals_are_counted(fleet: Fleet, clock: ManualClock) -> None:
    fleet.register("ada", max_concurrent=5)
    client = client_of(fleet)
    fleet.post("slow", lease_ttl=10, max_attempts=1)
    fleet.post("again", lease_ttl=10)
    fleet.claim("ada", 2)
    clock.advance(11)
    report = fleet.reap()
    assert len(report.expired) == 1 and len(report.dead) == 1
    got = scrape(client)
    assert value(got, "shoal_leases_expired_total", outcome="retry") == 1
    assert value(got, "shoal_leases_expired_total", outcome="dead") == 1
    assert value(got, "shoal_tasks_dead_total", cause="expired") == 1
    assert value(got, "shoal_tasks_failed_total", outcome="dead") == 0


@pytest.mark.parametrize("shared_store", ["sqlite"], indirect=True)  # the collector's bound
def test_cardinality_stays_bounded_with_500_agents(fleet: Fleet) -> None:
    fleet.configure(max_agents=500)
    agents = [f"agent-{i:03d}" for i in range(500)]
    for agent in agents:
        fleet.register(agent)
    # agent-000 gets 1 task, agent-001 2, ... up to 5: every queue non-empty
    fleet.post_many(
        [{"title": "t", "to": a} for i, a in enumerate(agents) for _ in range(i % 5 + 1)]
    )
    got = scrape(client_of(fleet))
    depths = {
        dict(labels)["agent"]: v for (name, labels), v in got.items() if name == "shoal_queue_depth"
    }
    assert len(depths) == TOP_QUEUES + 1
    assert sum(depths.values()) == sum(i % 5 + 1 for i in range(500))
    assert all(depths[name] == 5 for name in depths if name != "other")  # the deepest
    assert (
        value(got, "shoal_agents", status="idle") + value(got, "shoal_agents", status="waiting")
        == 500
    )
    assert len(got) < 250  # every other label is a closed set of words


def test_prometheus_asking_for_openmetrics_gets_it(fleet: Fleet) -> None:
    fleet.post("one")
    accept = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
    answer = client_of(fleet).get("/metrics", headers={"Accept": accept})
    assert answer.headers["content-type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in openmetrics_families(answer.text)}
    assert families["shoal_tasks_posted"].type == "counter"
    pending = [s for s in families["shoal_tasks"].samples if s.labels == {"state": "pending"}]
    assert [s.value for s in pending] == [1]


def test_a_viewer_token_is_enough_and_none_is_refused_once_tokens_exist(fleet: Fleet) -> None:
    """(An open fleet -- loopback, no token yet -- needs its owner's sign-in secret: every
    other test scrapes so.)"""
    _, secret = fleet.create_token("viewer", name="prometheus")
    client = client_of(fleet)
    refused = client.get("/metrics")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == "Bearer"
    assert "shoal_tasks" not in refused.text
    assert value(scrape(client, secret), "shoal_tasks", state="pending") == 0


def test_pending_tasks_are_counted_by_domain_with_the_long_tail_summed(fleet: Fleet) -> None:
    domains = [f"d{i:02d}" for i in range(TOP_DOMAINS + 10)]
    fleet.post_many(
        [{"title": "t", "domain": d} for i, d in enumerate(domains) for _ in range(i + 1)]
        + [{"title": "no domain"}, {"title": "no domain either"}]
    )
    fleet.register("ann")
    fleet.claim("ann")  # a claimed task is no longer pending
    got = scrape(client_of(fleet))
    by_domain = {
        dict(labels)["domain"]: v
        for (name, labels), v in got.items()
        if name == "shoal_pending_tasks"
    }
    pending = value(got, "shoal_tasks", state="pending")
    assert sum(by_domain.values()) == pending
    assert len(by_domain) == TOP_DOMAINS + 1  # the largest named, the rest as "other"
    assert by_domain["d59"] == 60 and "d00" not in by_domain
    assert "" not in by_domain or by_domain[""] <= 2

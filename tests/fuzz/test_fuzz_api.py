"""The Python API's entry points under random input, on every store: each call either
works or raises a ``ShoalError`` (never a driver's error, a ``UnicodeEncodeError`` or a
``RecursionError``), and a refused call leaves the fleet exactly as it was."""

from __future__ import annotations

import hashlib
import json
import random
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shoal import Fleet, ManualClock, ShoalError
from shoal.model import Lease
from shoal.settings import SETTINGS, Settings
from tests import pg
from tests.fuzz.strategies import FUZZ, json_values, numbers, texts, word
from tests.helpers import snapshot


def ints() -> st.SearchStrategy[int]:
    return st.one_of(st.integers(-3, 50), st.integers(), st.sampled_from([2**63, 10**23]))


def durations() -> st.SearchStrategy[Any]:
    """What a duration or a moment may be given as: a number, or text."""
    return st.one_of(numbers(), word())


def names() -> st.SearchStrategy[Any]:
    """Skills or domains: one text (commas allowed) or a list of texts."""
    return st.one_of(word(), st.lists(word(), max_size=3))


#: ``Fleet.post``'s arguments, each drawn from the values of its declared type.
POST_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "body": texts(),
    "payload": json_values(),
    "priority": st.one_of(ints(), word()),
    "skills": names(),
    "domain": word(),
    "to": word(),
    "after": st.lists(ints(), max_size=3),
    "parent": ints(),
    "pinned": st.booleans(),
    "expected_duration": durations(),
    "lease_ttl": durations(),
    "max_attempts": ints(),
    "key": texts(),
    "not_before": durations(),
    "retry_delay": durations(),
}


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def fuzzed(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Fleet]:
    """One fleet per store for each test (all its examples share it: a new fleet per
    example would cost more than the calls; one per module would let the megabyte bodies
    one test posts slow every check of the next)."""
    kind = str(request.param)
    if kind == "memory":
        url = f"memory://fuzz-{uuid.uuid4().hex}"
    elif kind == "sqlite":
        url = f"sqlite://{Path(tmp_path_factory.mktemp('fuzz')) / 'fleet.db'}"
    else:
        url = pg.fleet_url(request.getfixturevalue("postgres_server"))
    fleet = Fleet.open(url, create=True, clock=ManualClock(), rng=random.Random(7))
    yield fleet
    fleet.close()
    if kind == "postgres":
        pg.drop_fleet(url)


def state(fleet: Fleet) -> str:
    """``snapshot`` as one digest: the fleet collects megabyte bodies as the examples go,
    and comparing digests keeps each check cheap."""
    return hashlib.sha256(json.dumps(snapshot(fleet), sort_keys=True).encode()).hexdigest()


def refused_changes_nothing(fleet: Fleet, call: Callable[[], Any]) -> None:
    """Run ``call``: it must work or raise a ShoalError, and a refusal must change nothing."""
    before = state(fleet)
    refusal: ShoalError | None = None
    try:
        call()
    except ShoalError as exc:
        refusal = exc
    if refusal is not None:
        assert refusal.message and str(refusal)  # words, whatever the input
        assert state(fleet) == before, f"refused ({refusal.message}) yet the fleet changed"


def _lease(fleet: Fleet) -> Lease:
    """A live lease of ada's, whatever the examples before did to ada or the settings."""
    fleet.configure(max_agents=1000, failure_streak=0, max_attempts=3)
    fleet.register("ada", max_concurrent=1000, skills=["python"], domains=["web"])
    fleet.resume("ada")
    for held in fleet.leases("ada"):
        fleet.release(held)
    fleet.post("work for the fuzzer", to="ada")
    claim = fleet.claim("ada")
    assert claim, claim.reason
    return claim.grants[0].lease


@FUZZ
@given(title=texts(), fields=st.fixed_dictionaries({}, optional=POST_FIELDS))
def test_post_and_post_many(fuzzed: Fleet, title: Any, fields: dict[str, Any]) -> None:
    refused_changes_nothing(fuzzed, lambda: fuzzed.post(title, **fields))
    refused_changes_nothing(fuzzed, lambda: fuzzed.post_many([{"title": title, **fields}]))


@FUZZ
@given(result=json_values() | texts(), error=texts(), retry=st.booleans())
def test_complete_and_fail_with_any_result_or_error(
    fuzzed: Fleet, result: Any, error: Any, retry: Any
) -> None:
    lease = _lease(fuzzed)
    refused_changes_nothing(fuzzed, lambda: fuzzed.complete(lease, result))
    refused_changes_nothing(fuzzed, lambda: fuzzed.complete_many([(lease, result)]))
    other = _lease(fuzzed)
    refused_changes_nothing(fuzzed, lambda: fuzzed.fail(other, error, retry=retry))


@FUZZ
@given(
    agent=word(),
    token=texts(),
    task=ints(),
    number=ints(),
    text=word(),
    skills=names(),
    wait=st.sampled_from([0, "0s", -1, "1e30", 10**30, "x\x00", float("nan")]),
)
def test_leases_agents_and_reads_with_any_argument(
    fuzzed: Fleet,
    agent: str,
    token: str,
    task: int,
    number: int,
    text: str,
    skills: Any,
    wait: Any,
) -> None:
    """(A claim that may wait is not fuzzed with a real wait: it would pass in real time.)"""
    calls: list[Callable[[], Any]] = [
        lambda: fuzzed.complete(Lease(task, agent, token, 0.0)),
        lambda: fuzzed.fail(Lease(task, agent, token, 0.0), "e"),
        lambda: fuzzed.release(Lease(task, agent, token, 0.0)),
        lambda: fuzzed.defer(Lease(task, agent, token, 0.0), [number]),
        lambda: fuzzed.heartbeat(agent),
        lambda: fuzzed.claim(agent, number, wait=wait),
        lambda: fuzzed.register(agent, role=text, skills=skills, domains=skills),
        lambda: fuzzed.register(agent, max_concurrent=number),
        lambda: fuzzed.set_status(agent, text, why=token),
        lambda: fuzzed.resume(agent),
        lambda: fuzzed.agent(agent),
        lambda: fuzzed.leases(agent),
        lambda: fuzzed.get(task),
        lambda: fuzzed.show(task, events=number),
        lambda: fuzzed.by_key(token),
        lambda: fuzzed.tasks(state=text, agent=agent, limit=number, before=task),
        lambda: fuzzed.ready(agent, limit=number),
        lambda: fuzzed.events(number, task=task, agent=agent, limit=number),
        lambda: fuzzed.cancel(task),
        lambda: fuzzed.retry(task),
    ]
    for call in calls:
        refused_changes_nothing(fuzzed, call)


@FUZZ
@given(name=st.sampled_from(sorted(SETTINGS)) | word(), value=st.one_of(numbers(), texts()))
def test_configure_with_any_value(fuzzed: Fleet, name: str, value: Any) -> None:
    refused_changes_nothing(fuzzed, lambda: fuzzed.configure(**{name: value}))
    fuzzed.configure(**Settings().to_dict())  # back to the defaults for the next example

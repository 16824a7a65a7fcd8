"""The PostgreSQL direct claim takes tasks posted while its statement runs, and reports
them whole: their labels, poster and group are read again when the statement could not
see them (``_sqlstore._seen_by_the_statement``). Found by a listener test in the suite: a
task posted between the statement's start and the function's look-up came back with NULL
labels and the claim failed."""

from __future__ import annotations

import threading

import pytest

from shoal import Fleet

pytestmark = pytest.mark.slow


def test_tasks_posted_during_claims_come_back_whole(postgres_url: str) -> None:
    with Fleet.init(postgres_url) as setup:
        setup.register("ada", max_concurrent=4)
    posted = 400
    stop = threading.Event()
    errors: list[BaseException] = []
    taken = []

    def claim_all() -> None:
        with Fleet.open(postgres_url) as fleet:
            try:
                while not stop.is_set() or len(taken) < posted:
                    for grant in fleet.claim("ada", n=4).grants:
                        taken.append(grant.task)
                        fleet.complete(grant.lease)
            except BaseException as exc:  # reported below
                errors.append(exc)

    claimer = threading.Thread(target=claim_all)
    claimer.start()
    with Fleet.open(postgres_url) as poster:
        for i in range(posted):
            poster.post(f"task {i}", labels=[f"l{i % 3}"], group=f"g{i % 2}")
    stop.set()
    claimer.join(120)
    assert not errors, errors
    assert len(taken) == posted
    for task in taken:
        number = int(task.title.split()[1])
        assert task.labels == (f"l{number % 3}",), task
        assert task.group == f"g{number % 2}", task

"""A client stopped in the middle of a transaction (SIGSTOP, Ctrl-Z, a paused VM) does not
stop the fleet: the PostgreSQL server ends its session after a short silence, the others
go on, and the stalled client, when it resumes, finds its transaction gone (``StoreUnavailable``,
"try again") instead of committing late. (Found by the chaos suite: a worker frozen inside a
claim held the fleet lock, and every agent waited on it for ever.)"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time

import pytest

from shoal import Fleet
from tests import procs

CTX = mp.get_context("spawn")
pytestmark = pytest.mark.slow


def test_a_client_stopped_inside_a_transaction_does_not_stop_the_fleet(postgres_url: str) -> None:
    fleet = Fleet.init(postgres_url)
    here, there = CTX.Pipe()
    child = CTX.Process(target=procs.stall_holding_the_write_lock, args=(postgres_url, 1.0, there))
    child.start()
    try:
        assert here.recv() == "holding"  # it holds the fleet lock, inside its transaction
        os.kill(child.pid or 0, signal.SIGSTOP)
        posted: list[int] = []
        writer = threading.Thread(target=lambda: posted.append(fleet.post("next").id), daemon=True)
        began = time.monotonic()
        writer.start()
        writer.join(20)
        assert posted, "a post waited on the stopped client's lock for 20 s"
        assert time.monotonic() - began < 15
        os.kill(child.pid or 0, signal.SIGCONT)
        here.send("commit")
        assert here.recv() == "StoreUnavailable"  # its late commit is refused
        with fleet._store.read() as tx:
            assert tx.get_meta("probe") is None  # and nothing of it was written
    finally:
        os.kill(child.pid or 0, signal.SIGCONT)
        child.kill()
        child.join(10)
        fleet.close()

"""The README's Python examples run as printed: a newcomer copies them first, and an API
renamed under them (``Claim.items()`` once) must fail here rather than in their hands.

Each example is taken from README.md as it stands; only its fleet's URL is pointed at a
file of the test's own, and the worker's endless ``run`` is made to end once idle."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from shoal import Fleet

README = Path(__file__).resolve().parents[2] / "README.md"
URL = "sqlite:///tmp/fleet.db"


def python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", README.read_text("utf-8"), re.M | re.S)


def example(words: str) -> str:
    """The one Python block of the README that holds ``words``."""
    found = [block for block in python_blocks() if words in block]
    assert len(found) == 1, f"README.md has {len(found)} Python blocks with {words!r}"
    assert URL in found[0], f"the example no longer opens {URL}; update this test"
    return found[0]


def test_the_fleet_example_claims_completes_and_asks_for_the_next(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    code = example("fleet.claim(")
    scope: dict[str, Any] = {}
    exec(compile(code.replace(URL, url), "README.md", "exec"), scope)
    fleet = Fleet.open(url)
    try:
        (listed,) = fleet.tasks()
        task = fleet.get(listed.id)  # a listing leaves the result out
        assert task.title == "fix the parser" and task.state == "done", task
        assert task.result == {"ok": True}
        assert scope["nxt"] is not None  # complete(..., then_claim=1).next: the next claim
    finally:
        fleet.close()
        scope["fleet"].close()


def test_the_worker_example_forks_and_joins(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/fleet.db"
    code = example("@worker.task")
    run = "worker.run(handle_signals=True)"
    assert run in code, "the worker example no longer ends with its run; update this test"
    fleet = Fleet.open(url)
    try:
        fleet.configure(idle_timeout=0.05)  # the worker leaves once the work is done
        fleet.post("report", skills=["python"])
        scope: dict[str, Any] = {}
        before_run = code.replace(URL, url).replace(run, "")
        exec(compile(before_run, "README.md", "exec"), scope)
        worker = scope["worker"]
        worker.ephemeral = True
        worker.run()
        report = fleet.get(next(t.id for t in fleet.tasks() if t.title == "report"))
        assert report.state == "done"
        assert report.result == [{"part": 0}, {"part": 1}, {"part": 2}]
    finally:
        fleet.close()

# ruff: noqa: F811 -- the tests take the CLI tests' fixtures as parameters
"""Output that pipes, through the real `shoal` script in a pipe: plain lines, one per row,
no box drawing; compact JSON; the claim hand-off with eval in sh; the small things."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

from shoal import Fleet, TaskState
from tests.faces.cli_support import Shoal, fleet, shoal, url  # noqa: F401 (its fixtures)

BOX = re.compile("[\u2500-\u257f]")  # box-drawing characters (rules, frames)


def rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def test_piped_tables_are_one_tab_separated_line_per_row(shoal: Shoal, fleet: Fleet) -> None:
    fleet.register("ada", skills=["python"])
    long_title = "a title long enough that a terminal table would wrap it over several lines"
    for i in range(3):
        fleet.post(f"{long_title} {i}", skills=["python"])
    for command, count in (("list", 3), ("ready", 3), ("agents", 1), ("events", 4)):
        result = shoal(command)
        assert result.code == 0, result
        assert not BOX.search(result.out), (command, result.out)
        table = rows(result.out)
        assert len(table) == count + 1, (command, result.out)  # a header, then the rows
        assert len({len(row) for row in table}) == 1, (command, result.out)
    listed = rows(shoal("list").out)
    assert listed[0][:4] == ["id", "state", "p", "title"]
    assert listed[1][3] == f"{long_title} 2"  # whole, on its line


def test_json_is_compact_in_a_pipe_and_times_are_iso(shoal: Shoal, fleet: Fleet) -> None:
    fleet.post("x")
    result = shoal("list", "--json")
    assert len(result.out.strip().splitlines()) == 1  # one document, one line
    (task,) = json.loads(result.out)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", task["created_at"])
    assert shoal("--format", "json", "list").data == [task]


def test_eval_the_claim_then_done_in_sh(shoal: Shoal, fleet: Fleet, url: str) -> None:
    fleet.register("ada")
    task = fleet.post("hand me off")
    script = 'eval "$(shoal claim --agent ada --format env)" && shoal heartbeat && shoal done'
    env = {
        **os.environ,
        "SHOAL_STORE": url,
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
    }
    done = subprocess.run(
        ["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done
    assert f"task {task.id} done" in done.stdout
    assert fleet.get(task.id).state is TaskState.DONE


def test_env_format_is_refused_where_nothing_has_an_id(shoal: Shoal, fleet: Fleet) -> None:
    result = shoal("agents", "--format", "env")
    assert result.code == 2 and "claim and add" in result.err


def test_the_holder_releases_by_name_and_busy_names_what_it_holds(
    shoal: Shoal, fleet: Fleet
) -> None:
    fleet.register("ada")
    task = fleet.post("t")
    fleet.claim("ada")
    busy = shoal("claim", "--agent", "ada")
    assert busy.code == 1 and f"it holds {task.id}" in busy.text
    stranger = shoal("release", str(task.id), "--agent", "bob")
    assert stranger.code == 2  # bob is no agent of this fleet
    released = shoal("release", str(task.id), env={"SHOAL_AGENT": "ada"})
    assert released.code == 0, released
    assert fleet.get(task.id).state is TaskState.PENDING and fleet.get(task.id).attempts == 0


def test_events_tail_shows_the_newest_newest_last(shoal: Shoal, fleet: Fleet) -> None:
    for i in range(6):
        fleet.post(f"t{i}")
    tail = shoal("events", "-n", "2", "--json").data
    assert [e["task_id"] for e in tail] == [5, 6]


def test_durations_take_several_units_and_read_back(shoal: Shoal, fleet: Fleet) -> None:
    assert shoal("config", "set", "lease_ttl", "1h30m").text.strip() == "lease_ttl = 1h30m"
    assert fleet.settings().lease_ttl == 5400
    listing = shoal("config", "list").out
    assert "lease_ttl\t1h30m\t10m\t" in listing  # value, default, meaning


def test_empty_results_say_so_on_a_terminal_and_stay_empty_in_a_pipe(
    shoal: Shoal, fleet: Fleet
) -> None:
    piped = shoal("ready")
    assert piped.code == 0 and rows(piped.out)[0][0] == "id" and len(rows(piped.out)) == 1
    told = shoal("--format", "table", "ready")
    assert "nothing is ready" in told.out


def test_an_empty_claim_fails_the_eval_and_forgets_the_last_task(
    shoal: Shoal, fleet: Fleet, url: str
) -> None:
    fleet.register("ada")
    fleet.post("only one")
    script = (
        'n=0; while eval "$(shoal claim --agent ada --format env)"; do '
        "shoal done || exit 9; n=$((n+1)); [ $n -ge 3 ] && exit 8; done; "
        'echo "worked $n, left: ${SHOAL_TASK:-none}"'
    )
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "SHOAL_STORE": url, "PATH": f"{bindir}:{os.environ['PATH']}"}
    ran = subprocess.run(
        ["sh", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran  # the loop ends at the first empty claim
    assert "worked 1, left: none" in ran.stdout
    assert "nothing claimed" in ran.stderr


def test_escape_sequences_in_a_title_never_reach_the_terminal(shoal: Shoal, fleet: Fleet) -> None:
    task = fleet.post("placeholder")  # refused at input now; as an older shoal stored it:
    with sqlite3.connect(fleet.url.removeprefix("sqlite://")) as db:
        db.execute(
            "UPDATE tasks SET title = ? WHERE id = ?", ("a\x1b]0;PWN\x07b\nc\x1b[2J", task.id)
        )
    db.close()
    fleet.register("ada")
    for args in (("list", "--format", "table"), ("show", str(task.id), "--format", "table"),
                 ("claim", "--agent", "ada", "--format", "table"), ("list",)):  # fmt: skip
        result = shoal(*args)
        assert "\x1b]" not in result.out and "\x07" not in result.out, (args, result.out)
        assert "\x1b[2J" not in result.out, (args, result.out)
    added = shoal("add", "x\ny\x1b[31m")
    assert added.code == 2 and "\x1b" not in added.out + added.err  # refused, not echoed

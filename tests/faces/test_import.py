"""``shoal import beads|github|jsonl`` and the JSON Lines behind ``shoal add --file``.

Imports run the real command in a subprocess against a SQLite fleet, with fixtures written
the way ``bd export`` and ``gh issue list --json number,title,body,labels`` write them
(tests/fixtures/). What a caller relies on: each task is added once however often the file
is imported, the mapping rules (priorities, labels, blocking dependencies), and a bad line
refused with its line number and exit 2, having added nothing. The posting itself is
``Fleet.post_many``'s, contract-tested on every store, so SQLite is enough here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from shoal import Fleet, TaskState
from shoal.errors import BadInput
from shoal.faces import following, importing
from shoal.faces.cli import root as cli_module
from tests.faces.cli_support import COMMAND, Result, base_env
from tests.helpers import snapshot

FIXTURES = Path(__file__).parent.parent / "fixtures"
BEADS = FIXTURES / "beads_issues.jsonl"
GITHUB = FIXTURES / "github_issues.json"
TASKS = FIXTURES / "tasks.jsonl"

# Until the CLI registers the import commands, run them through a small entry point that does.
_REGISTERED = "add_import_commands(cli)" in Path(cli_module.__file__).read_text("utf-8")
_ENTRY = (
    "from shoal.faces.cli import cli, main; "
    "from shoal.faces.cli.imports import add_import_commands; add_import_commands(cli); main()"
)
_COMMAND = COMMAND if _REGISTERED else [sys.executable, "-c", _ENTRY]


@pytest.fixture
def url(tmp_path: Path) -> str:
    store = f"sqlite://{tmp_path / 'fleet.db'}"
    Fleet.init(store).close()
    return store


@pytest.fixture
def fleet(url: str) -> Any:
    with Fleet.open(url) as opened:
        yield opened


def shoal(url: str, *args: str, stdin: str | None = None) -> Result:
    """One real `shoal` process on the fleet at ``url``."""
    proc = subprocess.run(
        [*_COMMAND, *args],
        env=base_env({"SHOAL_STORE": url}),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return Result(proc.returncode, proc.stdout, proc.stderr)


def keyed(fleet: Fleet) -> dict[str, Any]:
    """Every task by its key, with what the import set (read whole: payloads included)."""
    return {t.key: fleet.get(t.id) for t in fleet.tasks(limit=1000) if t.key}


def after(fleet: Fleet, task_id: int) -> set[int]:
    return set(fleet.show(task_id).after)


# ---------------------------------------------------------------------- beads


def test_beads_import_twice_adds_each_task_once(url: str, fleet: Fleet) -> None:
    first = shoal(url, "import", "beads", str(BEADS), "--json")
    assert first.code == 0, first.err
    assert len(first.data["added"]) == 6 and first.data["existing"] == []
    assert first.data["skipped"] == 1  # the closed design issue

    again = shoal(url, "import", "beads", str(BEADS))
    assert again.code == 0, again.err
    assert "6 tasks: 0 added, 0 updated, 0 closed, 6 already there" in again.text
    assert "1 closed issue skipped" in again.text and "(nothing changed)" in again.text
    assert len(fleet.tasks(limit=1000)) == 6

    again_json = shoal(url, "import", "beads", "-", "--json", stdin=BEADS.read_text())
    assert again_json.data["added"] == [] and again_json.data["skipped"] == 1
    assert sorted(again_json.data["existing"]) == sorted(first.data["added"])


def test_beads_mapping_priorities_labels_and_blocking_dependencies(url: str, fleet: Fleet) -> None:
    assert shoal(url, "import", "beads", str(BEADS)).code == 0
    tasks = keyed(fleet)
    assert "beads:shl-a1f" not in tasks  # closed: skipped
    middleware, load, docs = tasks["beads:shl-b27"], tasks["beads:shl-c3d"], tasks["beads:shl-d44"]
    flaky, epic, alert = tasks["beads:shl-e05"], tasks["beads:shl-f6a"], tasks["beads:shl-g70"]
    # priority 0 -> 1, 1 -> 2, 2 -> 5, 3 -> 7, 4 -> 9
    assert [t.priority for t in (middleware, flaky, load, docs, epic)] == [1, 2, 5, 7, 9]
    assert (middleware.domain, middleware.skills) == ("backend", ("python",))
    assert (alert.domain, alert.skills) == ("ops", ("grafana",))
    assert epic.domain is None and epic.skills == ()
    assert middleware.expected_duration == 90 * 60
    assert "429 with Retry-After" in middleware.body  # acceptance criteria kept in the body
    assert middleware.payload["labels"] == ["domain:backend", "skill:python", "security"]
    # "blocks" -> after; a blocker that is closed is already met; related/parent-child are not
    assert middleware.state is TaskState.PENDING and after(fleet, middleware.id) == set()
    assert after(fleet, load.id) == {middleware.id}
    assert after(fleet, docs.id) == {middleware.id}
    assert after(fleet, alert.id) == {middleware.id, load.id}
    assert load.state is TaskState.BLOCKED and flaky.state is TaskState.PENDING
    # parent-child: the epic waits for its child, so it is not claimable before it is done
    assert after(fleet, epic.id) == {docs.id} and epic.state is TaskState.BLOCKED
    assert middleware.labels == ("domain:backend", "security", "skill:python")


def test_beads_bad_line_in_the_middle_adds_nothing(url: str, fleet: Fleet, tmp_path: Path) -> None:
    lines = BEADS.read_text().splitlines()
    issue = json.loads(lines[3])
    lines[3] = json.dumps({**issue, "priority": 7})
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join(lines) + "\n")
    before = snapshot(fleet)
    result = shoal(url, "import", "beads", str(bad))
    assert result.code == 2
    assert "line 4" in result.text and "shl-d44" in result.text and "priority" in result.text
    assert "nothing of the file was added" in result.text
    assert snapshot(fleet) == before


# ---------------------------------------------------------------------- GitHub


def test_github_import_twice_adds_each_issue_once(url: str, fleet: Fleet) -> None:
    first = shoal(url, "import", "github", str(GITHUB), "--json")
    assert first.code == 0, first.err
    assert len(first.data["added"]) == 6 and first.data["skipped"] == 1  # #45 is closed

    again = shoal(url, "import", "github", "-", stdin=GITHUB.read_text())
    assert again.code == 0, again.err
    assert "6 tasks: 0 added, 0 updated, 0 closed, 6 already there" in again.text
    assert len(fleet.tasks(limit=1000)) == 6


def test_github_mapping_of_labels(url: str, fleet: Fleet) -> None:
    assert shoal(url, "import", "github", str(GITHUB)).code == 0
    tasks = keyed(fleet)
    priorities = {key: t.priority for key, t in tasks.items()}
    assert priorities == {
        "github:41": 2,  # priority:high
        "github:42": 1,  # P0
        "github:43": 8,  # priority:low
        "github:44": 8,  # P3
        "github:46": 2,  # priority:medium and P1: the most urgent wins
        "github:47": 5,  # no priority label
    }
    slow = tasks["github:41"]
    assert (slow.domain, slow.skills) == ("store", ("sql",))
    assert tasks["github:46"].skills == ("postgres", "sql")
    assert tasks["github:47"].domain is None and tasks["github:47"].body == ""
    assert slow.payload["number"] == 41 and "bug" in slow.payload["labels"]


def test_github_bad_issue_names_its_line(url: str, fleet: Fleet) -> None:
    issues = json.loads(GITHUB.read_text())
    issues[2]["labels"].append({"name": "domain:web"})  # a second domain
    text = json.dumps([{"number": i["number"], **i} for i in issues], indent=2)
    opens = text[: text.index('"number": 43')].count("\n")  # the line of its "{", just above
    before = snapshot(fleet)
    result = shoal(url, "import", "github", "-", stdin=text)
    assert result.code == 2
    assert f"line {opens} (#43)" in result.text, result.text
    assert snapshot(fleet) == before


# ---------------------------------------------------------------------- shoal JSON Lines


def test_jsonl_dependencies_by_key_become_after(url: str, fleet: Fleet) -> None:
    result = shoal(url, "import", "jsonl", str(TASKS), "--json")
    assert result.code == 0, result.err
    assert len(result.data["added"]) == 4
    schema, backfill = fleet.by_key("schema"), fleet.by_key("backfill")
    switch = fleet.by_key("switch")
    assert schema and backfill and switch
    assert schema.priority == 2 and schema.expected_duration == 20 * 60
    assert after(fleet, backfill.id) == {schema.id}
    assert after(fleet, switch.id) == {schema.id, backfill.id}
    assert switch.state is TaskState.BLOCKED and backfill.payload == {"batch": 500}
    announce = next(t for t in fleet.tasks() if t.title == "Announce the change")
    assert announce.key and announce.key.startswith("jsonl:")  # keyed by its content
    assert announce.waiting(fleet.clock.now())

    again = shoal(url, "import", "jsonl", "-", stdin=TASKS.read_text())
    assert "4 tasks: 0 added, 4 already there" in again.text
    assert len(fleet.tasks(limit=1000)) == 4


def test_jsonl_depends_on_a_task_already_in_the_fleet(url: str, fleet: Fleet) -> None:
    schema = fleet.post("schema", key="schema")
    line = json.dumps({"title": "use it", "key": "use", "depends_on": ["schema"]})
    assert shoal(url, "import", "jsonl", "-", stdin=line + "\n").code == 0
    used = fleet.by_key("use")
    assert used and after(fleet, used.id) == {schema.id}


def test_jsonl_lines_carry_labels_and_a_group(url: str, fleet: Fleet) -> None:
    line = {"title": "migrate", "key": "m", "labels": ["db"], "group": "migrations"}
    assert shoal(url, "import", "jsonl", "-", stdin=json.dumps(line) + "\n").code == 0
    migrate = fleet.by_key("m")
    assert migrate and (migrate.labels, migrate.group) == (("db",), "migrations")


GOOD = '{"title": "first", "key": "one"}'
BAD_LINES = {
    "bad JSON": ('{"title": "second",', "not valid json"),
    "no title": ('{"priority": 3}', "needs a title"),
    "unknown field": ('{"title": "second", "owner": "ada"}', "unknown field: owner"),
    "bad priority": ('{"title": "second", "priority": "urgent"}', "priority"),
    "bad group": ('{"title": "second", "group": "a b"}', "group"),
    "unknown dependency": ('{"title": "second", "depends_on": ["nope"]}', "'nope'"),
    "cycle": ('{"title": "second", "key": "two", "depends_on": ["two"]}', "cycle"),
    "repeated key": ('{"title": "second", "key": "one"}', "already used on line 1"),
    "not an object": ("[1, 2]", "expected a json object"),
}


@pytest.mark.parametrize("case", BAD_LINES, ids=list(BAD_LINES))
def test_jsonl_bad_line_names_it_and_adds_nothing(url: str, fleet: Fleet, case: str) -> None:
    bad, words = BAD_LINES[case]
    text = "\n".join([GOOD, "", bad, '{"title": "third"}']) + "\n"
    before = snapshot(fleet)
    result = shoal(url, "import", "jsonl", "-", stdin=text)
    assert result.code == 2, result.text
    assert "line 3" in result.text and words in result.text
    assert snapshot(fleet) == before


def test_bad_input_as_json_and_unreadable_file(url: str, tmp_path: Path) -> None:
    result = shoal(url, "import", "jsonl", "-", "--json", stdin='{"title": 5}\n')
    assert result.code == 2
    assert result.data["error"]["code"] == "bad_input"
    assert result.data["error"]["message"].startswith("line 1:")
    missing = shoal(url, "import", "beads", str(tmp_path / "nope.jsonl"))
    assert missing.code == 2 and "cannot read" in missing.text


def test_empty_file_says_so(url: str) -> None:
    result = shoal(url, "import", "jsonl", "-", stdin="\n\n")
    assert result.code == 0 and "no tasks" in result.text


# ---------------------------------------------------------------------- pure reading


def test_parsing_checks_everything_before_any_fleet() -> None:
    batch = importing.parse_beads(BEADS.read_text())
    assert len(batch.entries) == 6 and [c.key for c in batch.closing] == ["beads:shl-a1f"]
    with pytest.raises(BadInput, match="line 2"):
        importing.parse_jsonl('{"title": "a", "key": "a"}\n{"title": "b", "depends_on": 3}\n')


def test_import_jsonl_reports_added_and_existing_in_file_order(fleet: Fleet) -> None:
    text = TASKS.read_text()
    first = following.import_jsonl(fleet, text)
    second = following.import_jsonl(fleet, text)
    assert second.added == () and sorted(second.existing) == sorted(first.added)
    assert second.to_dict() == {
        "added": [],
        "updated": [],
        "closed": [],
        "existing": list(second.existing),
        "skipped": 0,
        "held": 0,
    }
    assert second.message() == "4 tasks: 0 added, 4 already there (nothing changed)"

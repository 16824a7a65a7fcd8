"""One SQL store, two dialects: both files of named statements say the same things by the
same names, every statement is run by the shared store code, and read-only transactions
run them without their locking clauses."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shoal.stores._sql import load_queries

SRC = Path(__file__).resolve().parents[2] / "src" / "shoal" / "stores"
DIALECTS = ("sqlite", "postgres")
#: Statements whose parameters differ between the dialects, and why.
DIFFERENT_PARAMETERS = {
    # SQLite runs the pool steps once per skill set (one range of its partial index each):
    # :skillset there, the list %(skillsets)s on PostgreSQL (one LATERAL range per set).
    "pool_best": ({"skillset"}, {"skillsets"}),
    "pool_best_in_domain": ({"skillset"}, {"skillsets"}),
    "pool_longest": ({"skillset"}, {"skillsets"}),
    # SQLite's log has no gaps to wait for: it reads to the end, with no grace period.
    "events_settled": (set(), {"grace"}),
    # An agent's `heard` is a column SQLite is given; PostgreSQL generates it (migration 8).
    "save_agent": ({"heard"}, set()),
}
#: What a dialect writes for a statement it never needs (see the top of queries.sql).
NO_OP = "SELECT 1"


def parameters(dialect: str, sql: str) -> set[str]:
    pattern = r"(?<!:):([a-z_]+)" if dialect == "sqlite" else r"%\(([a-z_]+)\)s"
    return set(re.findall(pattern, sql))


def test_both_dialects_define_the_same_statements() -> None:
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    assert sorted(set(sqlite) - set(postgres)) == []
    assert sorted(set(postgres) - set(sqlite)) == []


def test_both_dialects_take_the_same_parameters() -> None:
    sqlite, postgres = load_queries("sqlite"), load_queries("postgres")
    for name in sorted(sqlite):
        if NO_OP in (sqlite[name], postgres[name]):
            continue
        ours, theirs = parameters("sqlite", sqlite[name]), parameters("postgres", postgres[name])
        expected = DIFFERENT_PARAMETERS.get(name)
        if expected is None:
            assert ours == theirs, name
        else:
            assert ours - theirs == expected[0] and theirs - ours == expected[1], name


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_named_statement_is_run_by_the_shared_store(dialect: str) -> None:
    """Statements are named only in the shared code (the dialects say how to run them, not
    which to run), and no store module writes SQL of its own."""
    shared_code = ("_sqltxbase.py", "_sqlreads.py", "_sqltx.py", "_sqlstore.py", "_sqlschedules.py")
    shared = "".join((SRC / name).read_text() for name in shared_code)
    named = set(re.findall(r'"([a-z_]+)"', shared))
    unused = sorted(set(load_queries(dialect)) - named)
    assert unused == [], f"named statements nobody runs: {unused}"
    for module in SRC.glob("*.py"):
        code = module.read_text()
        assert not re.search(r'execute\(\s*f?"(SELECT|UPDATE|INSERT|DELETE|WITH)', code), module


@pytest.mark.parametrize("dialect", DIALECTS)
def test_read_only_statements_are_the_same_without_their_locks(dialect: str) -> None:
    write, read = load_queries(dialect), load_queries(dialect, read_only=True)
    assert set(write) == set(read)
    lock = re.compile(r"\s+FOR (UPDATE|SHARE)( OF \w+)?( SKIP LOCKED)?")
    for name, sql in write.items():
        assert not lock.search(read[name]), name
        assert " ".join(lock.sub("", sql).split()) == " ".join(read[name].split()), name
    locking = [name for name, sql in write.items() if lock.search(sql)]
    assert (locking != []) == (dialect == "postgres")  # SQLite's writer queue locks instead


def test_event_data_seen_before_is_not_mistaken_for_equal_data_of_another_type() -> None:
    """The store remembers the JSON of event data it encoded lately; 1, 1.0 and True are
    equal as keys, but each must come back as itself."""
    from shoal.stores._sqltx import _event_json

    texts = [_event_json({"n": value}) for value in (1, True, 1.0, 1, [1], {"m": 1})]
    assert texts == [
        '{"n": 1}',
        '{"n": true}',
        '{"n": 1.0}',
        '{"n": 1}',
        '{"n": [1]}',
        '{"n": {"m": 1}}',
    ]

"""What the fuzz tests throw at shoal, and how many times.

The values are the ones an attacker or a clumsy script sends: NUL, escape sequences,
direction overrides, lone surrogates (what a non-UTF-8 argv becomes), numbers far past
any bound, a 1 MB blob, JSON of the wrong shape, and random unicode from every category.

Two sizes: inside `make test` a small run (``FUZZ_EXAMPLES`` examples per test, 25 by
default) keeps the suite fast; `make fuzz` sets ``HYPOTHESIS_PROFILE=fuzz`` for a big one
(``FUZZ_EXAMPLES``, 2,000 by default). Either way nothing is written to a hypothesis
database: a 1 MB example would bloat it, and a failure prints its example.
"""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

__all__ = ["FUZZ", "anything", "json_values", "numbers", "texts", "word"]

_BIG = os.environ.get("HYPOTHESIS_PROFILE", "") == "fuzz"
_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "2000" if _BIG else "25"))

#: The settings every fuzz test runs under.
FUZZ = settings(
    max_examples=_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=not _BIG,  # the small run is the same on every `make test`
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)

#: A megabyte: past every length limit of every field.
BLOB = "x" * 1_000_000

SPECIALS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "x \x1b[2J\x1b]0;pwned\x07",
    "\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\",
    "invoice\u202efdp.exe",
    "\u2066isolate\u2069",
    "\udcff",
    "x\udcffy",
    "\ud800",
    "line\nbreak",
    "\r\n",
    "\x85\u2028\u2029",
    "\t",
    "\x7f\x9b",
    "[/]",
    "[bold red]markup[/]",
    "%s%n%x",
    "'; DROP TABLE tasks; --",
    "../../etc/passwd",
    "-",
    "--help",
    "ada",
    "python",
    "1",
    "#1",
    "0",
    "-1",
    "99999999999999999999",
    "1e23",
    "1e308",
    "nan",
    "inf",
    "-inf",
    "10m",
    "99999999999999999999d",
    "400d",
    "2026-13-45T99:00Z",
    "9999-12-31T23:59:59Z",
    "{}",
    "[]",
    '{"a":',
    "null",
    "true",
    "🐟" * 300,
]


def word() -> st.SearchStrategy[str]:
    """Short text: the specials, or random unicode of every category (surrogates too)."""
    return st.one_of(
        st.sampled_from(SPECIALS),
        st.text(alphabet=st.characters(exclude_categories=()), max_size=30),
    )


def texts() -> st.SearchStrategy[str]:
    """Text of any length: mostly short, now and then (one time in twenty) the 1 MB blob."""
    return st.one_of(*[word()] * 19, st.just(BLOB))


def numbers() -> st.SearchStrategy[int | float]:
    return st.one_of(
        st.integers(min_value=-3, max_value=20),
        st.integers(),
        st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**23, 10**400]),
        st.floats(allow_nan=True, allow_infinity=True),
    )


def json_values() -> st.SearchStrategy[Any]:
    """JSON-shaped values of any kind, their strings from ``word``."""
    scalars = st.one_of(st.none(), st.booleans(), numbers(), word())
    return st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(word(), inner, max_size=3),
        max_leaves=8,
    )


def anything() -> st.SearchStrategy[Any]:
    """Any value at all: text, a number, JSON, or the wrong type."""
    return st.one_of(texts(), numbers(), st.none(), st.booleans(), json_values())

"""shoal.text's two ends (what is refused at input, how text is shown at output) and the
settings' ceilings, as pure functions."""

from __future__ import annotations

import pytest

from shoal.errors import BadInput, InvalidSetting
from shoal.limits import MAX_COUNT, MAX_DURATION, MAX_LEASE_TTL
from shoal.settings import Settings, parse_setting
from shoal.task_checks import check_post
from shoal.text import check_block, check_line, check_storable, safe


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("x \x1b[2J\x1b]0;pwned\x07", "x \\x1b[2J\\x1b]0;pwned\\x07"),
        ("invoice\u202efdp.exe", "invoice\\u202efdp.exe"),
        ("\u2066isolated\u2069 \u200fmark", "\\u2066isolated\\u2069 \\u200fmark"),
        ("nul\x00 del\x7f csi\x9b", "nul\\x00 del\\x7f csi\\x9b"),
        ("half \udcff", "half \\udcff"),
        ("two\nlines\tand a tab", "two\nlines\tand a tab"),
        ("[bold]markup[/] stays text ✓ 数据", "[bold]markup[/] stays text ✓ 数据"),
    ],
)
def test_safe_writes_out_what_a_terminal_would_obey(raw: str, shown: str) -> None:
    assert safe(raw) == shown
    assert "\n" not in safe(raw, one_line=True)


def test_a_line_and_a_block_differ_only_in_line_breaks_and_tabs() -> None:
    assert check_block("body", "a\n\tb") == "a\n\tb"
    with pytest.raises(BadInput, match=r"title holds the control character U\+000A at position 2"):
        check_line("title", "a\nb")
    assert check_block("body", "a\r\nb\r\n") == "a\r\nb\r\n"  # a file from Windows
    assert safe("a\r\nb") == "a\r\nb"
    with pytest.raises(BadInput, match=r"body holds the control character U\+000D at position 2"):
        check_block("body", "a\rb")  # a carriage return alone rewrites the line shown
    assert safe("ok\rfake") == "ok\\x0dfake"
    with pytest.raises(BadInput, match=r"holds the bidirectional control U\+2067 at position 1"):
        check_block("body", "\u2067x")


def test_json_values_are_storable_everywhere_or_refused() -> None:
    fine = {"k": ["\x1b[2J is kept: JSON escapes it", {"deep": 1}]}
    assert check_storable("payload", fine) is fine
    with pytest.raises(BadInput, match="payload holds a string with the NUL character"):
        check_storable("payload", {"a": {"b": ["\x00"]}})
    deep: object = "bottom"
    for _ in range(100):
        deep = [deep]
    with pytest.raises(BadInput, match="nests deeper than 64 levels"):
        check_storable("payload", deep)
    fields = dict.fromkeys(["skills", "domain", "to", "after", "parent", "key"])
    nones = dict.fromkeys(["expected_duration", "lease_ttl", "max_attempts"])
    with pytest.raises(BadInput, match="nests deeper"):  # checked before it is serialised
        check_post("t", "", deep, 5, pinned=False, **fields, **nones)


@pytest.mark.parametrize(
    ("name", "value", "says"),
    [
        ("lease_ttl", "366d", "at most 365d"),
        ("lease_ttl", MAX_LEASE_TTL + 1, "at most 365d"),
        ("retry_delay", MAX_DURATION * 2, "at most 3650d"),
        ("max_agents", 10**23, "at most 1,000,000"),
        ("max_agents", "100000000000000000000000", "at most 1,000,000"),
        ("max_attempts", MAX_COUNT + 1, "at most 1,000,000"),
        ("aging", 1e300, "at most 1,000,000"),
    ],
)
def test_every_setting_has_a_ceiling_named_in_its_refusal(
    name: str, value: object, says: str
) -> None:
    with pytest.raises(InvalidSetting, match=says):
        parse_setting(name, value)


def test_a_fleet_holding_a_value_past_a_ceiling_still_opens_at_the_ceiling() -> None:
    """An older shoal had no ceilings: its stored settings are read, capped, not refused."""
    stored = Settings.from_mapping({"lease_ttl": 3000 * 86400.0, "max_agents": 10**9})
    assert stored.lease_ttl == MAX_LEASE_TTL
    assert stored.max_agents == MAX_COUNT


@pytest.mark.parametrize("field", ["expected_duration", "lease_ttl", "retry_delay", "not_before"])
def test_a_number_too_big_for_a_float_is_refused_not_an_overflow(field: str) -> None:
    """The fuzz tests found it: 10**400 seconds raised OverflowError from the API."""
    fields = dict.fromkeys(["skills", "domain", "to", "after", "parent", "key"])
    times = dict.fromkeys(["expected_duration", "lease_ttl", "max_attempts"])
    with pytest.raises(BadInput, match=field):
        check_post("t", "", None, 5, pinned=False, **fields, **{**times, field: 10**400})

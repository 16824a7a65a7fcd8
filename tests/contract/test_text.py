"""Untrusted text is checked the same way on every store (docs/SECURITY.md, "Untrusted
text"): what one store refuses, every store refuses, with the field and the character
named, and nothing changes. Also: empty skill or domain names, settings past their
ceilings, and a refused token that names neither the holder nor any token."""

from __future__ import annotations

import re
from typing import Any

import pytest

from shoal import BadInput, Fleet, InvalidSetting, LeaseLost
from shoal.model import Lease
from tests.helpers import one, snapshot

ESC, RLO, NUL, SURROGATE = "\x1b", "\u202e", "\x00", "\udcff"


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"title": f"a{NUL}b"}, "title holds the NUL character U+0000 at position 2"),
        (
            {"title": "t", "body": f"line\n{NUL}"},
            "body holds the NUL character U+0000 at position 6",
        ),
        ({"title": f"x {ESC}[2J"}, "title holds the control character U+001B at position 3"),
        ({"title": f"x{ESC}]0;pwned\a"}, "title holds the control character U+001B"),
        ({"title": f"invoice{RLO}fdp.exe"}, "title holds the bidirectional control U+202E"),
        ({"title": f"x{SURROGATE}"}, "title holds a lone surrogate"),
        ({"title": "t", "body": f"ok\n{ESC}[31mred"}, "body holds the control character U+001B"),
        ({"title": "line one\nline two"}, "title holds the control character U+000A"),
        ({"title": "t", "key": f"k{NUL}"}, "key holds the NUL character"),
        ({"title": "t", "payload": {"a": [f"x{NUL}"]}}, "payload holds a string with the NUL"),
        ({"title": "t", "payload": {f"k{SURROGATE}": 1}}, "payload holds a string with a lone"),
        ({"title": "t", "skills": [""]}, "skill name is empty"),
        ({"title": "t", "skills": " , "}, "skill name is empty"),
        ({"title": "t", "domain": ""}, "domain name is empty"),
        ({"title": "t", "to": "ada\n"}, "agent id 'ada\\n' is not valid"),
    ],
)
def test_text_a_store_cannot_keep_or_a_terminal_should_not_see_is_refused_at_post(
    fleet: Fleet, fields: dict[str, Any], says: str
) -> None:
    fleet.register("ada")
    before = snapshot(fleet)
    with pytest.raises(BadInput, match=re.escape(says)):
        fleet.post(**fields)
    with pytest.raises(BadInput):
        fleet.post_many([fields])
    assert snapshot(fleet) == before
    # What is refused is narrow: line breaks and tabs in a body, any script, are kept.
    body = "step 1:\tparse\nstep 2:\t\u05e2\u05d5\u05dc\u05dd — 数据 ✓ 🐟"  # Hebrew too
    task = fleet.post("ünïcode titles are fine ✓", body=body)
    assert (fleet.get(task.id).title, fleet.get(task.id).body) == (task.title, body)


@pytest.mark.parametrize(
    ("result", "says"),
    [
        (f"done{NUL}", "result holds the NUL character"),
        (f"done{SURROGATE}", "result holds a lone surrogate"),
        (f"{ESC}[2Jdone", "result holds the control character U+001B at position 1"),
        ({"out": f"a{NUL}"}, "result holds a string with the NUL"),
        ({"out": [f"{SURROGATE}"]}, "result holds a string with a lone surrogate"),
    ],
)
def test_bad_text_in_a_result_is_refused_and_the_lease_is_kept(
    fleet: Fleet, result: object, says: str
) -> None:
    fleet.register("ada")
    fleet.post("t")
    _, lease = one(fleet.claim("ada"))
    before = snapshot(fleet)
    with pytest.raises(BadInput, match=re.escape(says)):
        fleet.complete(lease, result)
    with pytest.raises(BadInput, match=re.escape(says)):
        fleet.complete_many([(lease, result)])
    assert snapshot(fleet) == before
    assert fleet.complete(lease, "fine\nresult\twith tabs").task.result == "fine\nresult\twith tabs"


@pytest.mark.parametrize("error", [f"boom{NUL}", f"boom{ESC}[2J", f"boom{SURROGATE}", f"{RLO}mooB"])
def test_bad_text_in_an_error_is_refused_and_the_lease_is_kept(fleet: Fleet, error: str) -> None:
    fleet.register("ada")
    fleet.post("t")
    _, lease = one(fleet.claim("ada"))
    before = snapshot(fleet)
    with pytest.raises(BadInput, match="error holds"):
        fleet.fail(lease, error)
    assert snapshot(fleet) == before


@pytest.mark.parametrize("bad", [f"a{NUL}", f"a{SURROGATE}", "ada\n", f"{ESC}c", ""])
def test_every_agent_id_and_filter_refuses_bad_text(fleet: Fleet, bad: str) -> None:
    """Read paths and lookups too: on PostgreSQL a NUL used to reach the server."""
    fleet.register("ada")
    fleet.post("t")
    before = snapshot(fleet)
    calls = [
        lambda: fleet.register(bad),
        lambda: fleet.claim(bad),
        lambda: fleet.heartbeat(bad),
        lambda: fleet.agent(bad),
        lambda: fleet.leases(bad),
        lambda: fleet.resume(bad),
        lambda: fleet.set_status(bad, "idle"),
        lambda: fleet.tasks(agent=bad),
        lambda: fleet.ready(bad),
        lambda: fleet.events(agent=bad),
        lambda: fleet.complete(Lease(1, bad or "x\n", "0" * 16, 0.0)),
    ]
    for call in calls:
        with pytest.raises(BadInput, match="agent id"):
            call()
    with pytest.raises(BadInput, match="role holds"):
        fleet.register("bob", role=f"r{ESC}")
    with pytest.raises(BadInput, match="skill name is empty"):
        fleet.register("bob", skills=[""])
    with pytest.raises(BadInput, match="domain name is empty"):
        fleet.register("bob", domains=[""])
    with pytest.raises(BadInput, match="key holds"):
        fleet.by_key(f"k{NUL}")
    with pytest.raises(BadInput, match="lease token holds"):
        fleet.complete(Lease(1, "ada", f"{NUL}abc", 0.0))
    assert snapshot(fleet) == before


def test_a_wrong_token_names_neither_the_holder_nor_any_token(fleet: Fleet) -> None:
    fleet.register("holder-agent")
    fleet.post("t")
    task, lease = one(fleet.claim("holder-agent"))
    guess = Lease(task.id, "", "0000", 0.0)
    with pytest.raises(LeaseLost) as refused:
        fleet.complete(guess)
    said = str(refused.value)
    assert f"task {task.id} is not held under that token" in said
    assert "holder-agent" not in said and lease.token not in said and "0000" not in said
    assert fleet.get(task.id).state.value == "claimed"


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"lease_ttl": "400d"}, "lease_ttl must be at most 365d"),
        ({"lease_ttl": "99999999999999999999d"}, "lease_ttl must be at most 365d"),
        ({"max_agents": 10**23}, "max_agents must be at most 1,000,000"),
        ({"max_agents": 1e23}, "max_agents must be at most 1,000,000"),
        ({"busy_threshold": 2**64}, "busy_threshold must be at most 1,000,000"),
        ({"stall_factor": 1e300}, "stall_factor must be at most 1,000,000"),
        ({"heartbeat_timeout": "4000d"}, "heartbeat_timeout must be at most 3650d"),
    ],
)
def test_settings_past_their_ceiling_are_refused_with_the_bound(
    fleet: Fleet, changes: dict[str, object], says: str
) -> None:
    before = snapshot(fleet)
    with pytest.raises(InvalidSetting, match=re.escape(says)):
        fleet.configure(**changes)
    assert snapshot(fleet) == before

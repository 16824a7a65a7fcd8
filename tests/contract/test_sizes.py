"""Sizes (issue 28, M5): a task's payload and body are capped by the fleet's settings
(``max_payload_bytes``, ``max_body_bytes``, 1 MiB each by default), and a listing never reads a
payload or a result, however large: only the one-task views do."""

from __future__ import annotations

import pytest

from shoal import BadInput, Fleet, InvalidSetting, TooLarge
from tests.helpers import one, snapshot

MIB = 1024 * 1024


def _payload(size: int) -> dict[str, str]:
    """A payload of exactly ``size`` bytes as compact JSON."""
    return {"blob": "x" * (size - len('{"blob":""}'))}


def test_a_payload_or_body_past_the_cap_is_refused_and_adds_nothing(fleet: Fleet) -> None:
    fleet.post("already here")
    before = snapshot(fleet)
    with pytest.raises(TooLarge) as refused:
        fleet.post("big", payload=_payload(MIB + 1))
    assert isinstance(refused.value, BadInput) and refused.value.code == "too_large"
    assert "payload is 1,048,577 bytes as JSON" in refused.value.message
    assert "at most 1,048,576 (max_payload_bytes)" in refused.value.message
    assert "shoal config set max_payload_bytes" in (refused.value.hint or "")
    with pytest.raises(TooLarge, match=r"body is 1,048,577 bytes"):
        fleet.post("long", body="y" * (MIB + 1))
    with pytest.raises(TooLarge, match=r"body is 1,048,578 bytes"):  # bytes, not characters
        fleet.post("long", body="é" * (MIB // 2 + 1))
    with pytest.raises(TooLarge, match=r"^task 1 of the batch: payload is"):
        fleet.post_many([{"title": "fine"}, {"title": "big", "payload": _payload(2 * MIB)}])
    assert snapshot(fleet) == before

    at_the_cap = fleet.post("just fits", payload=_payload(MIB), body="z" * MIB)
    assert fleet.get(at_the_cap.id).payload == _payload(MIB)


def test_the_caps_are_settings_with_bounds(fleet: Fleet) -> None:
    assert fleet.settings().max_payload_bytes == MIB == fleet.settings().max_body_bytes
    raised = fleet.configure(max_payload_bytes="8MiB", max_body_bytes="512K")
    assert (raised.max_payload_bytes, raised.max_body_bytes) == (8 * MIB, 512 * 1024)
    big = fleet.post("big", payload=_payload(7 * MIB))
    assert fleet.get(big.id).has_payload
    with pytest.raises(TooLarge, match="body is"):
        fleet.post("long", body="y" * (512 * 1024 + 1))
    before = fleet.settings()
    for value in ("lots", -1, 1023, "65MiB", True):
        with pytest.raises(InvalidSetting, match="max_payload_bytes"):
            fleet.configure(max_payload_bytes=value)
    assert fleet.settings() == before


def test_listings_read_no_payload_or_result_and_the_one_task_views_do(fleet: Fleet) -> None:
    fleet.register("ada")
    done = fleet.post("done", payload={"in": 1})
    claimed, lease = one(fleet.claim("ada"))
    assert claimed.payload == {"in": 1} and not claimed.listed  # a claim reads it whole
    fleet.complete(lease, {"out": 2})
    held = fleet.post("held", payload=[1, 2])
    fleet.claim("ada")
    plain = fleet.post("plain")
    waiting = fleet.post("waiting", payload="text")

    listed = {t.id: t for t in fleet.tasks()}
    for task in [*listed.values(), *fleet.ready(), *fleet.status().agents[0].held]:
        assert task.listed and task.payload is None and task.result is None, task
        as_json = task.to_dict()
        assert "payload" not in as_json and "result" not in as_json
        assert as_json["has_payload"] == task.has_payload
    assert [listed[i].has_payload for i in (done.id, held.id, plain.id, waiting.id)] == [
        True,
        True,
        False,
        True,
    ]
    assert listed[done.id].has_result and not listed[held.id].has_result
    assert sorted(t.id for t in fleet.ready()) == [plain.id, waiting.id]
    assert [t.id for t in fleet.status().agents[0].held] == [held.id]

    whole = fleet.get(done.id)
    assert not whole.listed and (whole.payload, whole.result) == ({"in": 1}, {"out": 2})
    assert whole.to_dict()["payload"] == {"in": 1} and whole.to_dict()["has_result"]
    assert fleet.show(held.id).task.payload == [1, 2]
    assert fleet.get(plain.id).to_dict()["payload"] is None

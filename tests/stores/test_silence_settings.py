"""A claim asks whether any agent is silent with the heartbeat_timeout of the settings its
store read last (claim_context), and asks again when the stored ones have another: a
timeout changed by another process counts from the first claim that reads it."""

from __future__ import annotations

from shoal import Fleet, ManualClock


def test_a_timeout_shortened_elsewhere_counts_at_the_next_claim(
    shared_store: tuple[str, str],
) -> None:
    _, url = shared_store
    clock = ManualClock()
    with Fleet.open(url, clock=clock) as here, Fleet.open(url, clock=clock) as there:
        here.register("quiet")
        clock.advance(10)  # quiet: silent past 3 s, not past the default timeout
        here.register("loom", max_concurrent=2)
        here.post("one")
        here.post("two", to="quiet")
        assert [t.title for t in here.claim("loom").tasks] == ["one"]
        there.configure(heartbeat_timeout=3)
        assert here._store._settings[1].heartbeat_timeout != 3  # here read the default
        claim = here.claim("loom")  # quiet is written down offline, its queue in the pool
        assert [(g.task.title, g.source) for g in claim.grants] == [("two", "pool")]
        assert [e.agent for e in here.events() if e.kind == "agent.offline"] == ["quiet"]

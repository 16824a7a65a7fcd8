"""Lease tokens cannot be guessed from other tokens.

Over MCP a token is the proof that lets a caller act on a task its session does not hold
(I8), and an MCP client sees the token of every task it claims. A token drawn from a
seeded Mersenne Twister would give the generator away: 312 tokens of 64 bits are its 624
outputs, and from them every later token follows. This test plays that client.
"""

from __future__ import annotations

import random

from shoal import Fleet


def _untemper(y: int) -> int:
    """The Mersenne Twister state word behind one 32-bit output (inverts its tempering)."""
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    x = y
    for _ in range(5):
        x = y ^ ((x << 7) & 0x9D2C5680)
    y = x & 0xFFFFFFFF
    x = y
    for _ in range(3):
        x = y ^ (x >> 11)
    return x & 0xFFFFFFFF


def _predictor(tokens: list[str]) -> random.Random:
    """A generator in the state a seeded one would be after handing out ``tokens``."""
    words: list[int] = []
    for token in tokens:  # getrandbits(64) takes the low word first
        value = int(token, 16)
        words += [value & 0xFFFFFFFF, value >> 32]
    state = tuple(_untemper(w) for w in words[:624])
    guesser = random.Random()
    guesser.setstate((3, (*state, 624), None))
    return guesser


def test_the_untempering_does_predict_a_seeded_generator() -> None:
    """The attack works on the generator shoal used to draw tokens from (so the next test
    means something)."""
    seeded = random.Random(12345)
    seen = [f"{seeded.getrandbits(64):016x}" for _ in range(312)]
    guesser = _predictor(seen)
    assert f"{guesser.getrandbits(64):016x}" == f"{seeded.getrandbits(64):016x}"


def test_a_client_that_saw_312_tokens_cannot_predict_the_next() -> None:
    with Fleet.open("memory://tokens") as fleet:
        fleet.register("seer", skills=["x"])
        fleet.register("victim", skills=["x"])
        seen = []
        for i in range(312):
            fleet.post(f"t{i}", skills=["x"])
            lease = fleet.claim("seer").leases[0]
            seen.append(lease.token)
            fleet.complete(lease)
        guesser = _predictor(seen)
        fleet.post("secret", skills=["x"])
        theirs = fleet.claim("victim").leases[0].token
        assert len(theirs) == 16 and int(theirs, 16) >= 0
        assert f"{guesser.getrandbits(64):016x}" != theirs

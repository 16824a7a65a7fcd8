"""How much one step takes at once: every batch size and cap of the Fleet, named once.

A claim, a reap or a listing that ran unbounded would hold the store's writer for as long
as the fleet is large; each loop here works in batches whose size is named below, so the
cost of one transaction has a ceiling whatever the fleet's size.
"""

from __future__ import annotations

__all__ = [
    "EXPIRE_PER_CLAIM",
    "MAX_BATCH",
    "MAX_COUNT",
    "MAX_DURATION",
    "MAX_EVENTS",
    "MAX_LEASE_TTL",
    "MAX_LISTED",
    "MAX_NAMES",
    "MAX_NUMBER",
    "MAX_PRUNE_BATCH",
    "MAX_READY",
    "MAX_SIZE",
    "PRUNE_BATCH",
    "PRUNE_PER_PASS",
    "SCAN_BATCH",
    "SHOWN_STUCK",
    "SQUASH_TRIES",
    "TASK_HISTORY",
]

#: The most tasks one claim may take, and the most an agent may hold.
MAX_BATCH = 1000
#: Leases a claim (or heartbeat, or rebalance) expires before it looks for work; the
#: monitor's reap takes them all, in ``SCAN_BATCH``es.
EXPIRE_PER_CLAIM = 100
#: Rows a transaction reads per round when it walks a set that may be large (the leases due
#: to expire, the queue of an agent going away).
SCAN_BATCH = 500
#: The most skills a task requires or an agent has, and the most domains an agent works in.
#: Every claim matches the agent's skills against each skill set waiting in the pool, so
#: an unbounded list (a task text that steers its agent to post "all skills") would make
#: every later claim and listing pay for it; real tasks name a few.
MAX_NAMES = 64
#: The most tasks ``Fleet.tasks`` lists at once.
MAX_LISTED = 1_000_000
#: The most tasks ``Fleet.ready`` previews at once.
MAX_READY = 100_000
#: The most events ``Fleet.events`` returns at once.
MAX_EVENTS = 100_000_000
#: The events of one task ``Fleet.show`` reads (then keeps the newest it was asked for).
TASK_HISTORY = 100_000
#: Stuck tasks (blocked on dead or cancelled ones) a status snapshot names.
SHOWN_STUCK = 1000
#: Finished tasks one prune transaction deletes (with their events), by default and at most:
#: a batch holds the writer for milliseconds, so claims go on between batches.
PRUNE_BATCH = 500
MAX_PRUNE_BATCH = 10_000
#: How often ``prune --squash`` tries to replace a git board's history while agents push.
SQUASH_TRIES = 20
#: Tasks (and events of no task) one pass of the monitor prunes at most; the rest waits for
#: the next pass, so a fleet that turns retention on pays for its backlog a little at a time.
PRUNE_PER_PASS = 10_000

#: The longest lease, whether a task asks for it (``lease_ttl=``) or the fleet's setting
#: gives it: a year. One constant, so the task's cap and the setting's agree; a longer lease
#: would keep a dead agent's work away for good.
MAX_LEASE_TTL = 365 * 86400.0
#: The longest any other duration setting (or a task's ``--in``) may be: ten years, far
#: beyond any real use, and small enough that a moment it yields is still a date.
MAX_DURATION = 10 * 365 * 86400.0
#: The largest count a setting takes (max_agents, thresholds, attempts): a sane ceiling that
#: keeps every count a small integer on every store.
MAX_COUNT = 1_000_000
#: The largest plain number a setting takes (stall_factor, aging).
MAX_NUMBER = 1_000_000.0
#: The largest size cap a fleet takes (``max_payload_bytes``, ``max_body_bytes``): 64 MiB.
#: A task is read whole by every claim of it, so even this is far past what a task should
#: carry; large data belongs in a file or a URL the task names.
MAX_SIZE = 64 * 1024 * 1024

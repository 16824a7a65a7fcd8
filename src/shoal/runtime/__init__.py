"""Running agents: ``worker`` (one agent: claim, run, heartbeat, idle, leave), ``command``
(a shell command per task), ``hub`` (reap, rebalance, assess on an interval) and
``supervisor`` (local worker processes, as many as the work calls for)."""

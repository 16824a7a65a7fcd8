"""The Fleet and its inside: the one API of shoal, and the rooms it is built of.

Only ``Fleet`` is public (``from shoal import Fleet``, or from here); every module of this
package is the Fleet's own and may change with it. Read them top-down, as a call runs:

- ``_fleet``: ``Fleet`` itself -- opening a fleet, posting, reading -- with its other
  verbs in ``_leaseverbs`` (an agent at work: leases, heartbeat, the claim and finishing
  work), ``_agentverbs`` (the agent registry), ``_operatorverbs`` (the operator's and the
  hub's verbs) and ``_scheduleverbs`` (recurring tasks), over ``_verbbase``;
- ``_claiming``: the claim cascade (expire, capacity, own queue, pool, steal, idle) and the
  hub's rebalance; ``_agents``, ``_hub``, ``_posting``, ``_pruning``, ``_tokens``: the
  bodies of the other verbs, each inside the transaction its verb opens;
- ``_liveness``: who is offline, who may come back (silence and seats);
- ``_transitions``: the named transitions, each writing its own events;
- ``_conflicts``: running a verb again when the store reports a write conflict.

Below this package: ``policy`` (the pure decisions) and ``stores`` (the verbs of a
transaction), then the model. docs/ARCHITECTURE.md draws the layers.
"""

from shoal.fleet._fleet import Fleet

__all__ = ["Fleet"]

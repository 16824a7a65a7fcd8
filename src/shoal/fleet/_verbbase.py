"""What the parts of ``Fleet`` share: its store, its clock and its randomness.

``Fleet`` is one class built from parts, as redis-py builds its client from command
mixins: an agent's verbs at work (``_leaseverbs``), the agent registry (``_agentverbs``),
the operator's and hub's verbs (``_operatorverbs``) and the schedules (``_scheduleverbs``)
are classes of verbs that ``Fleet`` inherits, so the API stays one class while no module
grows past a reading. Each part inherits this base, which declares once the attributes
``Fleet.__init__`` sets; mypy then checks every part's use of them. It holds no behaviour
of its own: a verb that needs more than these lives in the part that has it (the claim's
helpers with ``LeaseVerbs``, which builds on ``ScheduleVerbs`` for the claim's look).
"""

from __future__ import annotations

import random

from shoal.clock import Clock
from shoal.stores.base import Store

__all__ = ["FleetBase"]


class FleetBase:
    """The state every verb of ``Fleet`` works on, set by ``Fleet.__init__``."""

    _store: Store
    clock: Clock
    rng: random.Random

"""``shoal._log``: the library's loggers import ``logging`` only when a record needs it, and
an application that configures nothing sees nothing (the NullHandler), as before."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
from shoal._log import get_logger, lazy_logger, when_loaded
log = lazy_logger("shoal.stores.sqlite")
log.warning("dropped: nothing configured logging")
assert "logging" not in sys.modules, "a record nobody can see imported logging"
{more}
"""


def run(more: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE.format(more=more)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )


def test_a_record_nobody_configured_for_is_dropped_without_logging() -> None:
    done = run("log.error('still nothing'); print('ok')")
    assert done.stdout == "ok\n" and done.stderr == ""


def test_once_logging_is_in_use_records_go_to_it_and_the_nullhandler_is_there() -> None:
    done = run(
        "import logging\n"
        "log.warning('no handler but the NullHandler: no lastResort print')\n"
        "held = logging.getLogger('shoal').handlers\n"
        "assert any(isinstance(h, logging.NullHandler) for h in held)\n"
        "logging.basicConfig(level=logging.DEBUG, format='%(name)s %(levelname)s %(message)s')\n"
        "log.debug('seen %s', 1)\n"
    )
    assert done.stderr == "shoal.stores.sqlite DEBUG seen 1\n"


def test_the_cli_set_up_waits_for_the_first_record_it_lets_through() -> None:
    done = run(
        "calls = []\n"
        "when_loaded(20, lambda: calls.append('set up'))\n"
        "log.debug('below the level: dropped')\n"
        "assert calls == [] and 'logging' not in sys.modules\n"
        "log.info('at the level')\n"
        "assert calls == ['set up'] and 'logging' in sys.modules\n"
        "print('ok')"
    )
    assert done.stdout == "ok\n"

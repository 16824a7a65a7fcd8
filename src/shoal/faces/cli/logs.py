"""The CLI's logging: where the ``shoal`` loggers' records go, and from which level.

The library only logs (``shoal._log.get_logger(__name__)`` in each module, a ``NullHandler``
on ``shoal``); the CLI, being the application, decides. It sends the ``shoal`` hierarchy to
stderr, one line per record (UTC time, level, logger, message), from a level chosen by:

* ``-v``/``-q`` on ``shoal``, when given: each ``-v`` one step more (INFO, then DEBUG), each
  ``-q`` one step less (ERROR, then CRITICAL), counted from WARNING;
* else ``SHOAL_LOG_LEVEL``: DEBUG, INFO, WARNING, ERROR or CRITICAL, or a number;
* else WARNING.

Other libraries' loggers (psycopg, the MCP SDK) are left to their own defaults.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from typing import TextIO

from shoal._log import LOG_LEVEL_ENV, get_logger, resolve_level
from shoal.text import safe

__all__ = ["LOG_LEVEL_ENV", "configure_logging", "resolve_level"]

_FORMAT = "%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s"
_DATE = "%Y-%m-%dT%H:%M:%S"


class _OneLine(logging.Formatter):
    """A record on one line: newlines (a traceback, a message with one) are escaped, and so
    is every other control character (``shoal.text.safe``): a message may quote task text."""

    def __init__(self, fmt: str, datefmt: str) -> None:
        super().__init__(fmt, datefmt)
        self.converter = time.gmtime

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record).replace("\r", "\\r").replace("\n", "\\n")
        return safe(line)


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is when a record comes (a test's capture, rich's
    Live redirect), never to a stream that was replaced and closed since."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure_logging(verbose: int = 0, quiet: int = 0) -> int:
    """Send the ``shoal`` loggers to stderr from the chosen level; returns the level.

    Called once per command (the ``shoal`` group's callback); called again (tests running
    many commands in one process), it replaces its own handler instead of adding another.
    """
    level = resolve_level(verbose, quiet, os.environ.get(LOG_LEVEL_ENV))
    logger = get_logger("shoal")
    for handler in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(_OneLine(_FORMAT, _DATE))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # an embedding program's root handlers would print it twice
    return level

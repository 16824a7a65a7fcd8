"""The CLI's logging: where the ``shoal`` loggers' records go, and from which level.

The library only logs (``logging.getLogger(__name__)`` in each module, a ``NullHandler`` on
``shoal``); the CLI, being the application, decides. It sends the ``shoal`` hierarchy to
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

from shoal.errors import BadInput
from shoal.text import safe

__all__ = ["LOG_LEVEL_ENV", "configure_logging", "resolve_level"]

#: The environment variable that sets the level when neither -v nor -q is given.
LOG_LEVEL_ENV = "SHOAL_LOG_LEVEL"
_NAMES = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
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


def resolve_level(verbose: int = 0, quiet: int = 0, env: str | None = None) -> int:
    """The level from the flags, else from ``env`` (SHOAL_LOG_LEVEL's value), else WARNING."""
    if verbose or quiet:
        level = logging.WARNING + 10 * (quiet - verbose)
        return min(max(level, logging.DEBUG), logging.CRITICAL)
    text = (env or "").strip()
    if not text:
        return logging.WARNING
    if text.upper() in _NAMES:
        return int(logging.getLevelName(text.upper()))
    if text.upper() == "WARN":
        return logging.WARNING
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 100:
        raise BadInput(
            f"{LOG_LEVEL_ENV}={text!r} is not a log level",
            hint=f"use one of {', '.join(_NAMES)}, or a number from 0 to 100 "
            "(10 is DEBUG, 30 WARNING)",
        )
    return number


def configure_logging(verbose: int = 0, quiet: int = 0) -> int:
    """Send the ``shoal`` loggers to stderr from the chosen level; returns the level.

    Called once per command (the ``shoal`` group's callback); called again (tests running
    many commands in one process), it replaces its own handler instead of adding another.
    """
    level = resolve_level(verbose, quiet, os.environ.get(LOG_LEVEL_ENV))
    logger = logging.getLogger("shoal")
    for handler in [h for h in logger.handlers if isinstance(h, _Stderr)]:
        logger.removeHandler(handler)
    handler = _Stderr()
    handler.setFormatter(_OneLine(_FORMAT, _DATE))
    logger.addHandler(handler)
    logger.setLevel(level)
    logger.propagate = False  # an embedding program's root handlers would print it twice
    return level

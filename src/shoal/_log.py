"""shoal's loggers, and ``logging`` imported only when something is logged.

The library only logs: each module takes its logger here (``get_logger(__name__)``), and
the ``shoal`` logger gets a ``NullHandler`` with the first of them, so that an application
that configures nothing sees nothing (the CLI configures: ``faces/cli/logs.py``).

Importing ``logging`` (with traceback, tokenize, string and threading) cost a CLI call
about two thirds of what starting Python costs, and the everyday calls log nothing
(docs/benchmarks.md, *The CLI's start*). So the modules on their path take a
``lazy_logger``, which imports ``logging`` when first used, and the CLI's set-up waits
for that moment too (``when_loaded``): nothing is logged before it, so nothing is lost.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from shoal.errors import BadInput

if TYPE_CHECKING:
    import logging

__all__ = ["LOG_LEVEL_ENV", "get_logger", "lazy_logger", "resolve_level", "when_loaded"]

#: The environment variable that sets the CLI's level when neither -v nor -q is given.
LOG_LEVEL_ENV = "SHOAL_LOG_LEVEL"
#: logging's level names and numbers (as ``logging.getLevelName`` has them).
LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}
_WARNING, _DEBUG, _CRITICAL = LEVELS["WARNING"], LEVELS["DEBUG"], LEVELS["CRITICAL"]

#: Whether a logger was handed out (the NullHandler is on); what waits for that.
_state: dict[str, Any] = {"ready": False, "level": None}
_waiting: list[Callable[[], object]] = []


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)``, the ``shoal`` logger's NullHandler in place, and what
    waited for logging (``when_loaded``) done first."""
    import logging

    if not _state["ready"]:
        _state["ready"] = True
        logging.getLogger("shoal").addHandler(logging.NullHandler())
        while _waiting:
            _waiting.pop(0)()
    return logging.getLogger(name)


class _LazyLogger:
    """A logger that is ``get_logger(name)`` once a record must reach logging.

    While ``logging`` is not imported, nothing has configured it: a record would reach only
    the NullHandler, and is dropped here without importing it -- unless the CLI has set
    logging up to come (``when_loaded``), from a level the record reaches."""

    def __init__(self, name: str) -> None:
        self._name = name

    def _needed(self, level: int) -> bool:
        if _state["ready"] or "logging" in sys.modules:
            return True
        return _state["level"] is not None and level >= _state["level"]

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(level):
            get_logger(self._name).log(level, msg, *args, stacklevel=2, **kwargs)

    def debug(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(10):
            get_logger(self._name).debug(msg, *args, stacklevel=2, **kwargs)

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(20):
            get_logger(self._name).info(msg, *args, stacklevel=2, **kwargs)

    def warning(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(30):
            get_logger(self._name).warning(msg, *args, stacklevel=2, **kwargs)

    def error(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(40):
            get_logger(self._name).error(msg, *args, stacklevel=2, **kwargs)

    def exception(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(40):
            get_logger(self._name).exception(msg, *args, stacklevel=2, **kwargs)

    def critical(self, msg: object, *args: object, **kwargs: Any) -> None:
        if self._needed(50):
            get_logger(self._name).critical(msg, *args, stacklevel=2, **kwargs)

    def isEnabledFor(self, level: int) -> bool:  # noqa: N802 -- logging's name
        return self._needed(level) and get_logger(self._name).isEnabledFor(level)

    def __getattr__(self, attr: str) -> Any:
        return getattr(get_logger(self._name), attr)


def lazy_logger(name: str) -> logging.Logger:
    """The logger ``name``, with ``logging`` imported only once a record needs it."""
    return _LazyLogger(name)  # type: ignore[return-value]


def when_loaded(level: int, action: Callable[[], object]) -> None:
    """Do ``action`` (the CLI's set-up of its loggers from ``level``) now if logging is in
    use, else just before a record of ``level`` or more first needs it."""
    if _state["ready"] or "logging" in sys.modules:
        get_logger("shoal")
        action()
    else:
        _state["level"] = level
        _waiting.append(action)


def resolve_level(verbose: int = 0, quiet: int = 0, env: str | None = None) -> int:
    """The level from the flags, else from ``env`` (SHOAL_LOG_LEVEL's value), else WARNING."""
    if verbose or quiet:
        level = _WARNING + 10 * (quiet - verbose)
        return min(max(level, _DEBUG), _CRITICAL)
    text = (env or "").strip()
    if not text:
        return _WARNING
    if text.upper() in LEVELS:
        return LEVELS[text.upper()]
    if text.upper() == "WARN":
        return _WARNING
    try:
        number = int(text)
    except ValueError:
        number = -1
    if not 0 <= number <= 100:
        raise BadInput(
            f"{LOG_LEVEL_ENV}={text!r} is not a log level",
            hint=f"use one of {', '.join(LEVELS)}, or a number from 0 to 100 "
            "(10 is DEBUG, 30 WARNING)",
        )
    return number

"""What a file of the git store's board must be for shoal to read it back: JSON whose
numbers are finite, fields of the kinds the model holds, and any failure named by the file
it broke.

Apart from ``_gitlayout`` (where each file sits and what it holds) because the board is
a branch anyone with access may edit by hand: everything read from it is checked as
untrusted input, and a bad edit is refused naming the file and field, never met later as
an internal error.
"""

from __future__ import annotations

import json
import math
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from enum import Enum
from types import UnionType
from typing import Any

from shoal.errors import InvalidSetting
from shoal.model import Agent, Task

__all__ = ["Malformed", "check_kinds", "finite", "parse", "reading"]


class Malformed(ValueError):
    """A file of the board that shoal cannot read back; ``path`` names it."""

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


@contextmanager
def reading(path: str) -> Iterator[None]:
    """Any failure to read the board's file ``path`` as a ``Malformed`` that names it: a
    hand edit is found by the file it broke."""
    try:
        yield
    except Malformed as exc:
        exc.path = exc.path or path
        raise
    except InvalidSetting as exc:  # not the caller's input: a hand edit of the board
        raise Malformed(f"{path}: {exc.message}", path) from exc
    except KeyError as exc:
        raise Malformed(f"{path} has no {exc.args[0]!r}", path) from exc
    except (TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise Malformed(f"{path} cannot be read: {exc}", path) from exc


def parse(content: bytes | str, where: str) -> Any:
    """The JSON value of one file (or line), refusing numbers no store keeps: ``NaN``,
    ``Infinity`` and ones too large for a float (``1e999``), which Python's json reads
    and shoal then cannot compare, sort or show -- a lease until ``Infinity`` never
    expires, and ``shoal list`` failed on it with an internal error."""
    unfit: list[str] = []

    def constant(text: str) -> float:
        unfit.append(text)
        return math.nan

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            unfit.append(text)
        return value

    value = json.loads(content, parse_constant=constant, parse_float=number)
    if unfit:
        field = _unfit_field(value) or "a value"
        raise Malformed(
            f"{where}: {field} is {unfit[0]}, not a finite number; shoal never writes one",
            where.partition(" ")[0],
        )
    return value


def _unfit_field(value: Any, at: str = "") -> str | None:
    """Where in ``value`` the first number that is not finite is (``store.pool_key``)."""
    if isinstance(value, float):
        return None if math.isfinite(value) else at
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        inner = f"{at}[{key}]" if isinstance(key, int) else f"{at}.{key}" if at else str(key)
        found = _unfit_field(item, inner)
        if found is not None:
            return found
    return None


def finite(value: Any, name: str) -> float:
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} is {value!r}, not a finite number")
    return number


def _kinds(cls: type) -> dict[str, tuple[type, ...] | None]:
    """The JSON types each field of ``cls`` may hold (None: any; enums and tuples are
    converted before the check, their items checked as strings)."""
    kinds: dict[str, tuple[type, ...] | None] = {}
    for name, hint in typing.get_type_hints(cls).items():
        if hint is Any or (isinstance(hint, type) and issubclass(hint, Enum)):
            kinds[name] = None
            continue
        allowed: set[type] = set()
        for arg in typing.get_args(hint) if isinstance(hint, UnionType) else (hint,):
            one = typing.get_origin(arg) or arg
            allowed |= {int, float} if one is float else {one}
        kinds[name] = tuple(allowed)
    return kinds


_KINDS = {Task: _kinds(Task), Agent: _kinds(Agent)}


def check_kinds(cls: type, values: dict[str, Any], path: str) -> None:
    """Each field of a task or agent file holds a value of its type. A person's edit that
    wrote ``"priority": "high"`` parsed, and every later claim or ``ready`` failed on it
    with an internal error (exit 70): it is refused here, naming the file and field."""
    for name, value in values.items():
        allowed = _KINDS[cls].get(name)
        if allowed is None:
            continue
        wrong = isinstance(value, bool) and bool not in allowed
        wrong = wrong or not isinstance(value, allowed)
        if not wrong and isinstance(value, tuple):
            wrong = not all(isinstance(item, str) for item in value)
        if wrong:
            raise Malformed(f"{path}: {name} holds {value!r}, not a value of its kind")

"""Untrusted text: what shoal accepts into a fleet, and how it shows it back.

Titles, bodies, results, errors and payloads come from agents and scripts, and people read
them on terminals. Two rules keep that safe, one at each end:

- **At input** (``check_line``, ``check_block``, ``check_storable``) text that no store can
  keep or no terminal should receive is refused, naming the field, the character and where
  it is: NUL, lone surrogates (half of a character: not valid UTF-8), C0 and C1 control
  characters (escape sequences start with them) and the bidirectional controls that make a
  line read differently from what it holds. A block (a body, a result, an error) may keep
  line breaks and tabs. Every store sees only text that passed, so SQLite, PostgreSQL and
  the memory store accept and refuse exactly the same things.
- **At output** (``safe``) whatever still holds such characters (a fleet written by an older
  shoal, a string inside a JSON payload, a message quoting input) is shown escaped, as
  ``\\x1b`` or ``\\u202e``: visible, inert, and never interpreted by the terminal.

This module sits at the bottom of the layers (it needs only ``shoal.errors``), so the
validation, the stores and every face use the same definitions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from shoal.errors import BadInput

__all__ = [
    "MAX_DEPTH",
    "check_block",
    "check_line",
    "check_storable",
    "describe",
    "lazy_compile",
    "safe",
    "shown_url",
]


class _LazyPattern:
    """A regular expression compiled when first used. Compiling is not free (these classes
    of characters take about 0.3 ms each), and a CLI call is a new process that uses few
    of them: compiled at import, they cost each call more than the call's own work. After
    the first use its methods are the compiled pattern's own (no indirection)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        compiled = re.compile(*self._source)
        for method in ("search", "match", "fullmatch", "sub", "subn", "split", "findall",
                       "finditer", "pattern", "flags", "groups", "groupindex"):  # fmt: skip
            setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done on first use (see ``_LazyPattern``)."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))


#: Bidirectional controls: embeddings and overrides (U+202A..U+202E) and isolates
#: (U+2066..U+2069). They reorder what a terminal shows ("Trojan Source").
_BIDI = "\u202a-\u202e\u2066-\u2069"
#: Refused in one-line fields: every C0 and C1 control, DEL, bidi controls, surrogates.
_LINE_REFUSED = lazy_compile(f"[\x00-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]")
#: Refused in blocks: the same, but a line break (LF, or CRLF as a file from Windows has
#: them) or a tab is fine. A carriage return alone moves a terminal's cursor back over the
#: line, so it is refused.
_BLOCK_REFUSED = lazy_compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\ud800-\udfff]|\r(?!\n)")
#: Escaped on display: what is refused in a block, plus the invisible direction marks
#: (U+200E, U+200F, U+061C), which are harmless to store but not to read.
_UNSAFE = lazy_compile(
    f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\u200e\u200f\u061c\ud800-\udfff]|\r(?!\n)"
)
_UNSAFE_ONE_LINE = lazy_compile(
    f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_BIDI}\u200e\u200f\u061c\ud800-\udfff]"
)

#: How deeply a JSON value (payload, result) may nest: deeper is refused, not overflowed.
MAX_DEPTH = 64


def describe(char: str) -> str:
    """What a refused character is, in words: ``the control character U+001B``."""
    point = ord(char)
    if point == 0:
        kind = "the NUL character"
    elif 0xD800 <= point <= 0xDFFF:
        kind = "a lone surrogate (half of a character, not valid UTF-8)"
    elif 0x202A <= point <= 0x202E or 0x2066 <= point <= 0x2069:
        kind = "the bidirectional control"
    else:
        kind = "the control character"
    return f"{kind} U+{point:04X}"


def _refuse(field: str, value: str, match: re.Match[str], allowed: str) -> BadInput:
    return BadInput(
        f"{field} holds {describe(match.group())} at position {match.start() + 1}; remove it",
        hint=f"{field} takes printable text{allowed}: no NUL, escape sequences, other control "
        "characters, direction overrides or invalid UTF-8",
    )


def check_line(field: str, value: str) -> str:
    """``value`` for a one-line field (a title, a key, a role, a name), or ``BadInput``
    naming ``field``, the first refused character and its position (from 1)."""
    match = _LINE_REFUSED.search(value)
    if match is not None:
        raise _refuse(field, value, match, " on one line")
    return value


def check_block(field: str, value: str) -> str:
    """``value`` for a block of text (a body, a result, an error): like ``check_line``, but
    line breaks (LF or CRLF) and tabs are kept."""
    match = _BLOCK_REFUSED.search(value)
    if match is not None:
        raise _refuse(field, value, match, " (line breaks and tabs are fine)")
    return value


_STORABLE_REFUSED = lazy_compile("[\x00\ud800-\udfff]")


def check_storable(field: str, value: object) -> object:
    """A JSON value (a payload, a structured result) every store can keep: no string in it,
    key or value, holds NUL or a lone surrogate (PostgreSQL's JSON refuses both; SQLite
    would keep what the other refuses), and it nests at most ``MAX_DEPTH`` deep. Other
    characters are kept exactly, JSON escapes them, and ``safe`` shows them escaped."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            match = _STORABLE_REFUSED.search(item)
            if match is not None:
                raise BadInput(
                    f"{field} holds a string with {describe(match.group())}; remove it",
                    hint="JSON text may not hold NUL or invalid UTF-8 on every store",
                )
            continue
        if isinstance(item, Mapping | Sequence) and not isinstance(item, bytes | bytearray):
            if depth >= MAX_DEPTH:
                raise BadInput(
                    f"{field} nests deeper than {MAX_DEPTH} levels",
                    hint="flatten it, or send the deep part as one JSON string",
                )
            if isinstance(item, Mapping):
                stack.extend((key, depth + 1) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return value


def _escape(match: re.Match[str]) -> str:
    point = ord(match.group())
    return f"\\x{point:02x}" if point < 0x100 else f"\\u{point:04x}"


def safe(text: str, *, one_line: bool = False) -> str:
    """``text`` to show on a terminal: every control character, direction control and
    lone surrogate written out as ``\\x1b`` / ``\\u202e``, so it is seen, not obeyed.
    Line breaks and tabs stay, unless ``one_line`` (then a line break is ``\\x0a`` too)."""
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).sub(_escape, text)


def shown_url(url: str) -> str:
    """``url`` fit for a message, a log or a banner: no password or token in it.

    The user part is taken to end at the *last* ``@`` of the address, not at the first
    ``/``, ``?`` or ``#``: a password written with those unescaped
    (``https://ada:pa/ss@host``) is still a password, and a URL parser would show it as a
    path. A user with no password stays for ssh and the databases (``git@host``) but is
    hidden for http(s), where it is usually a token (``https://<token>@host/...``). A
    path with an ``@`` in it may be hidden too: a message shows a little less, never a
    secret."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest or rest.startswith("/"):
        return url
    userinfo, _, after = rest.rpartition("@")
    user, colon, _ = userinfo.partition(":")
    if colon:
        return f"{scheme}://{user}:***@{after}"
    if scheme.endswith(("http", "https")):
        return f"{scheme}://***@{after}"
    return url

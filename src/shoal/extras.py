"""How to add an optional part of shoal (an extra: ``web``, ``mcp``, ``postgres``...) to
the shoal that is running, said the way it was installed.

A bare ``pip install 'shoal[web]'`` is the wrong advice for most people: shoal is installed
from a clone (so there is no ``shoal`` on their index), often by pipx or uv (whose
virtualenv pip does not reach), and often editable (which a plain install would replace by
a copy). The installer leaves the answer behind: ``direct_url.json`` (PEP 610) records
the folder shoal came from and whether it is editable, and the interpreter's prefix says
whose virtualenv this is.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["install_hint", "missing_extra"]


#: What each extra brings, in a user's words (the missing module's name would mislead:
#: ``anyio`` is no package anyone chose to install).
_BRINGS = {
    "web": "the dashboard, the HTTP API and /metrics",
    "mcp": "the MCP SDK",
    "remote": "the HTTP client that joins a hub",
    "postgres": "the PostgreSQL driver",
    "sim": "matplotlib, for charts",
}


def missing_extra(extra: str, needed_by: str) -> str:
    """The refusal's words when ``needed_by`` (```shoal serve```) cannot import what
    ``extra`` installs: they name the extra, not the module that happened to be imported
    first; ``install_hint(extra)`` is the hint to go with them."""
    brings = _BRINGS.get(extra)
    return (
        f"{needed_by} needs shoal's {extra} extra"
        + (f" ({brings})" if brings else "")
        + ", which is not installed here"
    )


def install_hint(extra: str, *, prefix: str | None = None) -> str:
    """The command that gives this shoal ``extra``: ``pipx install --force '/src/shoal[web]'``,
    ``uv tool install --force ...``, or this interpreter's ``pip install [-e] ...``."""
    source, editable = _source()
    spec = f"'{source}[{extra}]'" if source else f"'shoal[{extra}]'"
    parts = Path(prefix if prefix is not None else sys.prefix).parts
    if "pipx" in parts:
        return f"pipx install --force {spec}"
    if any(parts[i : i + 2] == ("uv", "tools") for i in range(len(parts) - 1)):
        return f"uv tool install --force {spec}"
    pip = f"{sys.executable} -m pip install"
    return f"{pip} -e {spec}" if editable and source else f"{pip} {spec}"


def _source() -> tuple[str | None, bool]:
    """The local folder shoal was installed from (None: from an index, or unknown), and
    whether it is installed editable."""
    from importlib import metadata  # here: it costs every command's start 12 ms

    try:
        recorded = metadata.distribution("shoal").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None, False
    if not recorded:
        return None, False
    try:
        found = json.loads(recorded)
        url = urlsplit(str(found["url"]))
        editable = bool(found.get("dir_info", {}).get("editable", False))
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, False
    if url.scheme != "file" or "dir_info" not in found:
        return None, False
    return unquote(url.path), editable

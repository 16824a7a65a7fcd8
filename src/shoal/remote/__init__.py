"""Joining a fleet over HTTP: ``RemoteFleet`` (``shoal.remote.fleet``) drives a fleet that
``shoal serve`` exposes at an ``http://`` or ``https://`` URL, for an agent on a host with
no access to the fleet's database (issue 15).

This module itself imports nothing heavy: the CLI asks ``is_remote`` of every store URL,
and only a remote one loads httpx (the ``remote`` extra), so ``import shoal`` and a local
fleet never need it.
"""

from __future__ import annotations

__all__ = ["is_remote"]


def is_remote(url: str | None) -> bool:
    """Whether ``url`` names a hub's HTTP API rather than a store."""
    return (url or "").strip().lower().startswith(("http://", "https://"))

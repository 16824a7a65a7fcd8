"""Who may use a shoal server: access tokens with a role, kept hashed in the fleet.

``shoal serve`` answers people (the dashboard) and agents (the HTTP API), on loopback or on
a network. Off loopback nobody is trusted for being able to reach the port, so every request
carries a token made by ``shoal token create``. A token has one of three roles:

- ``viewer`` reads: pages, listings, events, metrics;
- ``agent`` also acts, but only as the one agent it was made for (register it, claim,
  heartbeat, complete, fail, release its own leases) -- a leaked agent token cannot act as
  another agent or change the fleet;
- ``admin`` does everything: people's actions (retry, cancel, pause, settings), posting, any
  agent.

The fleet keeps only a SHA-256 of each token (the secret is 192 random bits, so a slow hash
would add nothing); the secret is shown once, when it is made. A token reads
``shoal_<id>_<secret>``: the id names it in listings and revocations without giving it away.
The tokens live in the store, so every server of a PostgreSQL fleet honours the same ones.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shoal.errors import BadInput

__all__ = [
    "MAX_TOKENS",
    "META_KEY",
    "Credential",
    "Role",
    "check_token_id",
    "credential_of",
    "decode",
    "encode",
    "entry",
    "make_secret",
    "match",
    "parse_role",
]

#: The store's meta entry that holds the tokens (JSON: id -> fields and hash).
META_KEY = "access_tokens"
#: The most tokens one fleet keeps (a listing shows them all).
MAX_TOKENS = 1000

_TOKEN_RE = re.compile(r"shoal_([0-9a-f]{8})_([A-Za-z0-9_-]{32})")
_ID_RE = re.compile(r"[0-9a-f]{8}")


class Role(StrEnum):
    """What a token lets its bearer do; each role can do all the ones before it."""

    VIEWER = "viewer"
    AGENT = "agent"
    ADMIN = "admin"


@dataclass(frozen=True)
class Credential:
    """One token as the fleet describes it: everything but the secret."""

    id: str
    role: Role
    agent: str | None  # for role agent: the one agent it acts as
    name: str
    created: float

    def allows(self, role: Role) -> bool:
        """Whether this token may do what ``role`` may (viewer < agent < admin)."""
        order = list(Role)
        return order.index(self.role) >= order.index(role)

    def may_act_as(self, agent_id: str) -> bool:
        """Whether this token may act as agent ``agent_id``: admin as anyone, an agent
        token as its own agent only."""
        return self.role is Role.ADMIN or (self.role is Role.AGENT and self.agent == agent_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": str(self.role),
            "agent": self.agent,
            "name": self.name,
            "created": self.created,
        }


def parse_role(value: object) -> Role:
    """``value`` as a Role, or ``BadInput`` naming the three."""
    try:
        return Role(str(value))
    except ValueError:
        raise BadInput(
            f"role {value!r} is not one of {', '.join(Role)}",
            hint="viewer reads, agent acts as its own agent, admin does everything",
        ) from None


def check_token_id(value: object) -> str:
    """A token id (8 hex digits, as ``shoal token list`` shows), or ``BadInput``."""
    if not isinstance(value, str) or not _ID_RE.fullmatch(value):
        raise BadInput(
            f"{value!r} is not a token id", hint="token ids are 8 hex digits: shoal token list"
        )
    return value


def make_secret() -> tuple[str, str]:
    """A new token's id and the whole token the bearer keeps."""
    token_id = secrets.token_hex(4)
    return token_id, f"shoal_{token_id}_{secrets.token_urlsafe(24)}"


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def decode(raw: str | None) -> dict[str, dict[str, Any]]:
    """The tokens kept in the store's meta entry (none if the entry is absent)."""
    return json.loads(raw) if raw else {}


def encode(kept: Mapping[str, Mapping[str, Any]]) -> str:
    return json.dumps(kept, sort_keys=True)


def entry(credential: Credential, token: str) -> dict[str, Any]:
    """What the store keeps of a new token: its description and the hash of the secret."""
    return {**credential.to_dict(), "sha256": _digest(token)}


def credential_of(fields: Mapping[str, Any]) -> Credential:
    return Credential(
        id=str(fields["id"]),
        role=Role(fields["role"]),
        agent=fields.get("agent"),
        name=str(fields.get("name", "")),
        created=float(fields["created"]),
    )


def match(kept: Mapping[str, Mapping[str, Any]], token: str) -> Credential | None:
    """The credential ``token`` proves, or None: the id picks the entry, and the hash is
    compared in constant time."""
    found = _TOKEN_RE.fullmatch(token.strip())
    if found is None:
        return None
    fields = kept.get(found.group(1))
    if fields is None or not hmac.compare_digest(str(fields["sha256"]), _digest(token.strip())):
        return None
    return credential_of(fields)

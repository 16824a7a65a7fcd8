"""The bodies of the Fleet's token verbs (``shoal.access`` says what a token is), run
inside the caller's transaction. The tokens are one meta entry of the store: there are few,
they change rarely, and every store has the entry already."""

from __future__ import annotations

from shoal import access
from shoal.access import Credential, Role
from shoal.errors import BadInput
from shoal.stores.base import StoreTx

__all__ = ["authenticate_in", "create_token_in", "revoke_token_in", "tokens_in"]


def tokens_in(tx: StoreTx) -> list[Credential]:
    kept = access.decode(tx.get_meta(access.META_KEY))
    return sorted((access.credential_of(f) for f in kept.values()), key=lambda c: c.created)


def create_token_in(
    tx: StoreTx, now: float, role: Role, agent: str | None, name: str
) -> tuple[Credential, str]:
    kept = access.decode(tx.get_meta(access.META_KEY))
    if len(kept) >= access.MAX_TOKENS:
        raise BadInput(
            f"the fleet keeps {access.MAX_TOKENS} tokens already",
            hint="revoke the ones no longer used: shoal token list, shoal token revoke ID",
        )
    token_id, secret = access.make_secret()
    while token_id in kept:
        token_id, secret = access.make_secret()
    credential = Credential(token_id, role, agent, name, now)
    kept[token_id] = access.entry(credential, secret)
    tx.set_meta(access.META_KEY, access.encode(kept))
    return credential, secret


def revoke_token_in(tx: StoreTx, token_id: str) -> Credential:
    kept = access.decode(tx.get_meta(access.META_KEY))
    fields = kept.pop(token_id, None)
    if fields is None:
        raise BadInput(f"no token {token_id}", hint="see the fleet's tokens: shoal token list")
    tx.set_meta(access.META_KEY, access.encode(kept))
    return access.credential_of(fields)


def authenticate_in(tx: StoreTx, token: str) -> Credential | None:
    return access.match(access.decode(tx.get_meta(access.META_KEY)), token)

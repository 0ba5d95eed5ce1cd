"""Bearer tokens of users and ServiceAccounts: made here, stored as a hash only.

A token is ``mst_<id>_<secret>`` (the secret 32 random bytes); its record is an object of
the internal kind ``Token`` in the store (so every server on the same database sees a new
or revoked token through the change log), named by the id, holding the SHA-256 of the
whole token, the identity (user and groups, or the ServiceAccount with its uid), the expiry
and who made it. The token itself is shown once, to whoever created it, and never stored
or logged. A ServiceAccount's token dies with the ServiceAccount (a new one of the same
name has another uid). Revoking a token deletes its record.

The records are not a kind of the REST API's generic routes: ``/apis/muster.dev/v1/tokens``
serves them without the hash (:func:`public_view`).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from muster.api.base import API_VERSION
from muster.api.conditions import epoch
from muster.server.access.attributes import AUTHENTICATED_GROUP, UserInfo, service_account_user

__all__ = [
    "TOKEN_KIND",
    "TOKEN_PREFIX",
    "TokenIndex",
    "new_token",
    "public_view",
    "token_hash",
    "token_record",
]

TOKEN_KIND = "Token"
TOKEN_PREFIX = "mst_"

Obj = dict[str, Any]


def new_token() -> tuple[str, str]:
    """A fresh ``(id, token)``."""
    token_id = secrets.token_hex(5)
    return token_id, f"{TOKEN_PREFIX}{token_id}_{secrets.token_urlsafe(32)}"


def token_hash(token: str) -> str:
    # A fast hash is right here: the token has 256 random bits, so there is nothing to guess.
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()


def token_record(
    token_id: str,
    token: str,
    *,
    user: str | None = None,
    groups: Iterable[str] = (),
    service_account: Mapping[str, str] | None = None,
    expires: str | None = None,
    description: str = "",
    created_by: str = "",
) -> Obj:
    """The stored record of a new token (a user's, or a ServiceAccount's ``{namespace, name, uid}``)."""
    spec: Obj = {"tokenHash": token_hash(token), "createdBy": created_by}
    meta: Obj = {"name": token_id}
    if service_account is not None:
        meta["namespace"] = service_account["namespace"]
        spec["serviceAccount"] = dict(service_account)
        spec["user"] = service_account_user(service_account["namespace"], service_account["name"]).name
    else:
        spec["user"] = user
        spec["groups"] = sorted(set(groups))
    if expires:
        spec["expirationTimestamp"] = expires
    if description:
        spec["description"] = description
    return {"apiVersion": API_VERSION, "kind": TOKEN_KIND, "metadata": meta, "spec": spec}


def public_view(record: Mapping[str, Any], now: float | None = None) -> Obj:
    """A record as the API shows it: everything but the hash, plus whether it has expired."""
    spec = {k: v for k, v in (record.get("spec") or {}).items() if k != "tokenHash"}
    meta = record["metadata"]
    out: Obj = {
        "apiVersion": API_VERSION,
        "kind": TOKEN_KIND,
        "metadata": {
            k: meta[k] for k in ("name", "namespace", "creationTimestamp", "resourceVersion") if meta.get(k)
        },
        "spec": spec,
    }
    if now is not None:
        expires = epoch(spec.get("expirationTimestamp"))
        out["status"] = {"expired": expires is not None and expires <= now}
    return out


@dataclass(frozen=True)
class _Entry:
    user: UserInfo
    expires_at: float | None
    service_account: tuple[str, str, str] | None  # namespace, name, uid


class TokenIndex:
    """Token hashes to identities, over one version of the records and ServiceAccounts."""

    def __init__(self, records: Iterable[Mapping[str, Any]], service_accounts: Iterable[Mapping[str, Any]]):
        self._accounts = {
            (sa["metadata"].get("namespace") or "default", sa["metadata"]["name"]): sa["metadata"].get("uid")
            for sa in service_accounts
        }
        self._by_hash: dict[str, _Entry] = {}
        self._by_id: dict[str, _Entry] = {}
        for rec in records:
            spec = rec.get("spec") or {}
            digest = spec.get("tokenHash")
            if not isinstance(digest, str):
                continue
            expires = spec.get("expirationTimestamp")
            sa = spec.get("serviceAccount")
            token_id = rec["metadata"]["name"]
            if isinstance(sa, dict):
                base = service_account_user(sa["namespace"], sa["name"])
                user = UserInfo(base.name, base.groups, token_id, expires)
                entry = _Entry(user, epoch(expires), (sa["namespace"], sa["name"], sa.get("uid") or ""))
            else:
                groups = tuple(dict.fromkeys([*(spec.get("groups") or ()), AUTHENTICATED_GROUP]))
                user = UserInfo(str(spec.get("user")), groups, token_id, expires)
                entry = _Entry(user, epoch(expires), None)
            self._by_hash[digest] = entry
            self._by_id[token_id] = entry

    def __len__(self) -> int:
        return len(self._by_hash)

    def lookup(self, token: str, now: float) -> tuple[UserInfo | None, str]:
        """The identity of ``token``, or None and why it is refused."""
        return self._check(self._by_hash.get(token_hash(token)), now)

    def live(self, token_id: str, now: float) -> bool:
        """Whether the token with this id still signs in (not revoked, expired or orphaned)."""
        return self._check(self._by_id.get(token_id), now)[0] is not None

    def _check(self, entry: _Entry | None, now: float) -> tuple[UserInfo | None, str]:
        if entry is None:
            return None, "invalid token"
        if entry.expires_at is not None and entry.expires_at <= now:
            return None, f"the token expired at {entry.user.expires}"
        if entry.service_account is not None:
            ns, name, uid = entry.service_account
            if self._accounts.get((ns, name)) != uid:
                return None, f"the token's ServiceAccount {ns}/{name} no longer exists"
        return entry.user, ""

"""The policy of one server, kept current from the store: who a token is, and what RBAC allows.

An informer (:class:`muster.controllers.cache.Cache`) follows the store's change log for the
RBAC kinds, ServiceAccounts and token records; when any of them changed, the next request
rebuilds the token index or the authorizer (both pure, from the cached objects). A write
through this server puts its result into the informer at once (:meth:`AccessControl.observe`),
so a token revoked here is refused by the very next request; another server on the same
database sees it within the store's poll interval.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from muster.controllers.cache import Cache
from muster.server.access.attributes import ADMIN_GROUP, AUTHENTICATED_GROUP, Attributes, UserInfo
from muster.server.access.rbac import Authorizer, Decision, Visibility
from muster.server.access.tokens import TOKEN_KIND, TokenIndex
from muster.store import Store

__all__ = ["ADMIN_USER", "POLICY_KINDS", "AccessControl"]

ADMIN_USER = "admin"
_RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")
POLICY_KINDS = (*_RBAC_KINDS, "ServiceAccount", TOKEN_KIND)


class AccessControl:
    """Authentication and authorization for one server over ``store``. ``admin_tokens`` are the
    bootstrap tokens (``$MUSTER_HOME/credentials``): the user ``admin`` in ``system:masters``."""

    def __init__(
        self, store: Store, admin_tokens: Collection[str], clock: Callable[[], float] = time.time
    ) -> None:
        if not admin_tokens:
            raise ValueError("the server needs at least one token")
        self.store = store
        self.clock = clock
        self._admin = [t.encode() for t in admin_tokens]
        self._admin_user = UserInfo(ADMIN_USER, (ADMIN_GROUP, AUTHENTICATED_GROUP))
        self.cache = Cache(store, POLICY_KINDS)
        self._lock = threading.Lock()
        self._started = False
        self._tokens = TokenIndex((), ())
        self._authorizer = Authorizer()

    # -- life ------------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._started:
                return
            self.cache.start()
            self._started = True
            self._rebuild({(k, "", "") for k in POLICY_KINDS})

    def stop(self) -> None:
        with self._lock:
            if self._started:
                self.cache.stop()
                self._started = False

    # -- questions --------------------------------------------------------------------------

    def authenticate(self, token: str) -> tuple[UserInfo | None, str]:
        """The identity a bearer token stands for, or None and why it is refused."""
        presented = token.encode()
        # compare_digest against every admin token: the time taken reveals nothing of them.
        if any([secrets.compare_digest(presented, t) for t in self._admin]):
            return self._admin_user, ""
        self._refresh()
        return self._tokens.lookup(token, self.clock())

    def still_valid(self, user: UserInfo) -> bool:
        """Whether the token ``user`` signed in with still signs in (the bootstrap token always)."""
        if user.token_id is None:
            return True
        self._refresh()
        return self._tokens.live(user.token_id, self.clock())

    def authorize(self, user: UserInfo, attrs: Attributes) -> Decision:
        self._refresh()
        return self._authorizer.authorize(user, attrs)

    def visibility(self, user: UserInfo, attrs: Attributes, namespaced_kind: bool) -> Visibility:
        self._refresh()
        return self._authorizer.visibility(user, attrs, namespaced_kind)

    @property
    def authorizer(self) -> Authorizer:
        self._refresh()
        return self._authorizer

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        self._refresh()
        return self.cache.get(kind, name, namespace)

    def list(self, kind: str, namespace: str | None = None) -> list[dict[str, Any]]:
        self._refresh()
        return self.cache.list(kind, namespace)

    # -- writes made through this server ----------------------------------------------------

    def observe(self, obj: dict[str, Any]) -> None:
        """A policy object this server just wrote (create or update): effective at once."""
        if obj.get("kind") in POLICY_KINDS and self._started:
            self.cache.observe(obj)

    def forget(self, obj: dict[str, Any]) -> None:
        """A policy object this server just deleted."""
        if obj.get("kind") in POLICY_KINDS and self._started:
            self.cache.forget(obj)

    # -- internals --------------------------------------------------------------------------

    def _refresh(self) -> None:
        if not self._started:
            self.start()
        changed = self.cache.take_changes()
        if changed:
            with self._lock:
                self._rebuild(changed)

    def _rebuild(self, changed: Collection[tuple[str, str, str]]) -> None:
        kinds = {k[0] for k in changed}
        cache = self.cache
        if kinds & {TOKEN_KIND, "ServiceAccount"}:
            self._tokens = TokenIndex(cache.list(TOKEN_KIND), cache.list("ServiceAccount"))
        if kinds & set(_RBAC_KINDS):
            self._authorizer = Authorizer(
                roles=cache.list("Role"),
                cluster_roles=cache.list("ClusterRole"),
                bindings=cache.list("RoleBinding"),
                cluster_bindings=cache.list("ClusterRoleBinding"),
            )

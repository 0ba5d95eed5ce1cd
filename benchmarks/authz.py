"""What authorization costs a request, with many bindings (goal: < 0.2 ms with 1,000).

Builds a policy of N RoleBindings and ClusterRoleBindings over N users and N/4 namespaces
(team editors by group, per-user viewers, a few cluster-wide readers), stores it, and measures:

* the decision alone (:class:`Authorizer`): warm (the identity's rules compiled) and cold (the
  first request of an identity after the policy changed), for an allowed and a denied request;
* what a request pays for access control, as the server runs it: the token looked up, the path
  read as Kubernetes attributes, the decision (and for a list across namespaces, what it may see),
  through :class:`AccessControl` over the store;
* a whole GET of an object through the ASGI app, for the user with N bindings in the store and
  with none (the same request, the same identity's rules), to see what the bindings add.

    .venv/bin/python benchmarks/authz.py [--bindings 1000] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from muster.server import create_app
from muster.server.access.attributes import Attributes, UserInfo, request_attributes
from muster.server.access.bootstrap import ensure_builtin
from muster.server.access.policy import AccessControl
from muster.server.access.rbac import Authorizer
from muster.server.access.tokens import new_token, token_record
from muster.store import Store, open_store
from muster.testing.tenancy import sample

Obj = dict[str, Any]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bindings", type=int, default=1000, help="RoleBindings and ClusterRoleBindings")
    parser.add_argument("--requests", type=int, default=2000, help="requests per measurement")
    args = parser.parse_args()
    n = args.bindings
    roles, cluster_roles, bindings, cluster_bindings = policy(n)
    print(
        f"policy: {len(bindings)} RoleBindings, {len(cluster_bindings)} ClusterRoleBindings, "
        f"{len(roles)} Roles, {len(cluster_roles)} ClusterRoles, {n // 4} namespaces"
    )
    decisions(roles, cluster_roles, bindings, cluster_bindings, args.requests)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MUSTER_HOME"] = tmp
        store = open_store(f"sqlite:///{Path(tmp) / 'muster.db'}?synchronous=normal")
        try:
            ensure_builtin(store)
            store.apply([*roles, *cluster_roles, *bindings, *cluster_bindings])
            token_id, token = new_token()
            store.create(token_record(token_id, token, user="user-7", groups=["team-7"], created_by="bench"))
            store.create(sample("TrainingJob", "job", "ns-7"))
            per_request(store, token, args.requests)
            whole_request(store, token, args.requests, with_bindings=True)
        finally:
            store.close()
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{Path(tmp) / 'muster.db'}?synchronous=normal")
        try:
            ensure_builtin(store)
            store.apply([b for b in bindings if b["metadata"]["name"] == "team-7-edit"])
            token_id, token = new_token()
            store.create(token_record(token_id, token, user="user-7", groups=["team-7"], created_by="bench"))
            store.create(sample("TrainingJob", "job", "ns-7"))
            whole_request(store, token, args.requests, with_bindings=False)
        finally:
            store.close()
    return 0


def policy(n: int) -> tuple[list[Obj], list[Obj], list[Obj], list[Obj]]:
    """n bindings: per namespace (n/4 of them) the team's editors and two users (one with the
    namespace's own Role, one viewer); the rest cluster-wide readers."""
    namespaces = max(1, n // 4)
    roles, bindings, cluster_bindings = [], [], []
    for i in range(namespaces):
        ns = f"ns-{i}"
        roles.append(
            {
                "apiVersion": "muster.dev/v1",
                "kind": "Role",
                "metadata": {"name": "runner", "namespace": ns},
                "rules": [
                    {
                        "apiGroups": ["muster.dev"],
                        "resources": ["trainingjobs", "workflows"],
                        "verbs": ["create", "get"],
                    },
                    {
                        "apiGroups": [""],
                        "resources": ["pods/log"],
                        "verbs": ["get"],
                        "resourceNames": [f"p-{i}"],
                    },
                ],
            }
        )
        bindings.append(
            _binding(f"team-{i}-edit", ns, "ClusterRole", "edit", {"kind": "Group", "name": f"team-{i}"})
        )
        for j in range(2):
            user = f"user-{(i * 2 + j) % n}"
            kind, role = ("Role", "runner") if j == 0 else ("ClusterRole", "view")
            bindings.append(_binding(f"{user}-{j}", ns, kind, role, {"kind": "User", "name": user}))
    for k in range(n - len(bindings)):
        cluster_bindings.append(
            _binding(f"reader-{k}", None, "ClusterRole", "view", {"kind": "User", "name": f"auditor-{k}"})
        )
    return roles, [], bindings, cluster_bindings


def _binding(name: str, ns: str | None, kind: str, role: str, subject: Obj) -> Obj:
    meta: Obj = {"name": name}
    if ns:
        meta["namespace"] = ns
    return {
        "apiVersion": "muster.dev/v1",
        "kind": "RoleBinding" if ns else "ClusterRoleBinding",
        "metadata": meta,
        "subjects": [subject],
        "roleRef": {"kind": kind, "name": role},
    }


def decisions(
    roles: list[Obj], cluster_roles: list[Obj], bindings: list[Obj], cluster_bindings: list[Obj], count: int
) -> None:
    from muster.server.access.bootstrap import builtin_objects

    builtin = [o for o in builtin_objects() if o["kind"] == "ClusterRole"]
    started = time.perf_counter()
    authorizer = Authorizer(roles, [*cluster_roles, *builtin], bindings, cluster_bindings)
    build = time.perf_counter() - started
    print(
        f"\nthe decision alone (Authorizer over {len(bindings) + len(cluster_bindings)} bindings; "
        f"built in {build * 1000:.1f} ms)"
    )
    user = UserInfo("user-7", ("team-7", "system:authenticated"))
    allowed = Attributes("delete", "trainingjobs", namespace="ns-7", name="job")
    denied = Attributes("delete", "trainingjobs", namespace="ns-8", name="job")
    assert authorizer.authorize(user, allowed).allowed and not authorizer.authorize(user, denied).allowed
    _report("warm, allowed", _time(lambda: authorizer.authorize(user, allowed), count))
    _report("warm, denied (message built)", _time(lambda: authorizer.authorize(user, denied), count))
    users = [UserInfo(f"user-{i}", (f"team-{i % 250}", "system:authenticated")) for i in range(count + 200)]
    fresh = Authorizer(roles, [*cluster_roles, *builtin], bindings, cluster_bindings)
    it = iter(users)
    _report("cold (first request of an identity)", _time(lambda: fresh.authorize(next(it), allowed), count))
    listing = Attributes("list", "trainingjobs")
    _report(
        "list across namespaces: what it may see",
        _time(lambda: authorizer.visibility(user, listing, True), count),
    )


def per_request(store: Store, token: str, count: int) -> None:
    control = AccessControl(store, ["admin-token"])
    control.start()
    try:
        path = "/apis/muster.dev/v1/namespaces/ns-7/trainingjobs/job"

        def one() -> None:
            user, _ = control.authenticate(token)
            assert user is not None
            attrs = request_attributes("GET", path, {})
            assert control.authorize(user, attrs).allowed

        def listing() -> None:
            user, _ = control.authenticate(token)
            assert user is not None
            attrs = request_attributes("GET", "/apis/muster.dev/v1/trainingjobs", {})
            control.visibility(user, attrs, True)

        print(
            "\nper request, as the server runs it "
            "(token lookup + attributes + decision, AccessControl over the store)"
        )
        _report("get an object", _time(one, count))
        _report("list across namespaces", _time(listing, count))
    finally:
        control.stop()


def whole_request(store: Store, token: str, count: int, with_bindings: bool) -> None:
    app = create_app(store, ["admin-token"])
    spent = _instrument(app.state.access)

    async def run() -> list[float]:
        transport = httpx.ASGITransport(app=app)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://muster", headers=headers) as c:
            path = "/apis/muster.dev/v1/namespaces/ns-7/trainingjobs/job"
            assert (await c.get(path)).status_code == 200
            out = []
            for _ in range(count):
                started = time.perf_counter()
                r = await c.get(path)
                out.append(time.perf_counter() - started)
                assert r.status_code == 200
            return out

    async def lifespan() -> list[float]:
        async with app.router.lifespan_context(app):
            return await run()

    times = asyncio.run(lifespan())
    inside = spent[-count:]
    policy_text = "with the whole policy" if with_bindings else "with one binding only"
    label = f"whole GET through the app, {policy_text}"
    if with_bindings:
        print("\nwhole requests (ASGI in-process, SQLite read included)")
    _report(label, times)
    _report("  of which in access control (authenticate + authorize)", inside)


def _instrument(control: AccessControl) -> list[float]:
    """Time spent in the access control's calls, summed per request (one authenticate starts one)."""
    per_request: list[float] = []

    def timed(fn: Callable[..., Any], starts: bool) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                took = time.perf_counter() - started
                if starts:
                    per_request.append(took)
                else:
                    per_request[-1] += took

        return wrapper

    control.authenticate = timed(control.authenticate, True)  # type: ignore[method-assign]
    control.authorize = timed(control.authorize, False)  # type: ignore[method-assign]
    control.visibility = timed(control.visibility, False)  # type: ignore[method-assign]
    return per_request


def _time(fn: Callable[[], object], count: int) -> list[float]:
    for _ in range(min(200, count)):
        fn()
    out = []
    for _ in range(count):
        started = time.perf_counter()
        fn()
        out.append(time.perf_counter() - started)
    return out


def _report(label: str, times: list[float]) -> None:
    times = sorted(times)
    p50 = statistics.median(times) * 1e6
    p99 = times[int(len(times) * 0.99) - 1] * 1e6
    mean = statistics.fmean(times) * 1e6
    print(f"  {label:<60} mean {mean:8.1f} µs   p50 {p50:8.1f} µs   p99 {p99:8.1f} µs")


if __name__ == "__main__":
    raise SystemExit(main())

"""Access control of the API server (docs/access-control.md): who a request comes from
(:mod:`.tokens`, :mod:`.authn`), what it asks to do (:mod:`.attributes`), whether RBAC allows
it (:mod:`.rbac`, pure), the policy kept current from the store (:mod:`.policy`), the one
FastAPI dependency every route passes through (:mod:`.guard`), the built-in roles
(:mod:`.bootstrap`), escalation checks on RBAC writes (:mod:`.escalation`) and the audit log
(:mod:`.audit`).
"""

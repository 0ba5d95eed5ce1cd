"""A pod template's effective requests, computed once per distinct resources."""

from __future__ import annotations

from typing import Any

import pytest

from muster.api.podspec import PodTemplateSpec
from muster.api.resources import pod_requests
from muster.controllers.trainingjob import pods
from muster.controllers.trainingjob.pods import template_requests


def _template(containers: list[dict[str, Any]], init: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers}
    if init is not None:
        spec["initContainers"] = init
    return {"spec": spec}


def _c(name: str, requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None, **extra: Any):
    resources: dict[str, Any] = {}
    if requests is not None:
        resources["requests"] = requests
    if limits is not None:
        resources["limits"] = limits
    return {"name": name, "image": "x", "command": ["true"], "resources": resources, **extra}


TEMPLATES = [
    _template([_c("main", {"cpu": "1"}, {"nvidia.com/gpu": 2})]),
    _template([_c("main", limits={"cpu": "500m", "memory": "1Gi"})]),  # limits stand in for requests
    _template([_c("a", {"cpu": "1"}), _c("b", {"cpu": "2", "memory": "1Gi"})]),
    # an init container's peak, and a sidecar (restartPolicy Always) counted beside the rest
    _template(
        [_c("main", {"cpu": "1"})],
        [_c("init", {"cpu": "4"}), _c("side", {"cpu": "1"}, restartPolicy="Always")],
    ),
    _template(
        [_c("main", {"cpu": "1"})],
        [_c("side", {"cpu": "1"}, restartPolicy="Always"), _c("init", {"cpu": "4"})],
    ),
    _template([{"name": "bare", "image": "x"}]),
]


@pytest.mark.parametrize("template", TEMPLATES)
def test_the_requests_are_pod_requests_of_the_validated_template(template: dict[str, Any]):
    expected = {k: str(q) for k, q in pod_requests(PodTemplateSpec.model_validate(template)).items()}
    assert template_requests(template) == expected
    again = template_requests(template)  # from the memo now: equal, and a dict of its own
    assert again == expected and again is not template_requests(template)


def test_templates_that_differ_elsewhere_share_their_requests_and_others_do_not():
    a = _template([_c("main", {"cpu": "1"}, env=[{"name": "X", "value": "1"}])])
    b = _template([_c("main", {"cpu": "1"}, env=[{"name": "X", "value": "2"}])])
    c = _template([_c("main", {"cpu": "2"})])
    assert template_requests(a) == template_requests(b) == {"cpu": "1"}
    assert template_requests(c) == {"cpu": "2"}
    # The order and kind of the init containers matter (a sidecar before an init container counts).
    assert template_requests(TEMPLATES[3]) != template_requests(TEMPLATES[4])


def test_the_memo_is_bounded(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(pods, "_REQUESTS", {})
    for i in range(pods._REQUESTS_KEPT + 10):
        template_requests(_template([_c("main", {"cpu": str(i + 1)})]))
    assert len(pods._REQUESTS) == pods._REQUESTS_KEPT
    assert template_requests(_template([_c("main", {"cpu": "1"})])) == {"cpu": "1"}  # evicted: computed again

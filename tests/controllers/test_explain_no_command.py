"""`why` on a pod (and its job) that could not start for want of a command: it names the image
whose entrypoint would have run and how to give a command, as `muster apply` warned."""

from __future__ import annotations

from pathlib import Path

import pytest

from muster.api.podspec import NO_COMMAND_HINT
from muster.controllers.insight.explain import WhyContext, explain
from muster.runtime.base import Container, DeviceBinding, LaunchError, PodLaunch, PodRef
from muster.runtime.local.launch import plan_launch
from muster.testing.cluster import condition, ddp_job, pod

IMAGE = "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"


def _launch_error(tmp_path: Path, image: str | None) -> str:
    """The message the executor gives the pod: the local runtime's own LaunchError."""
    ref = PodRef("default", "tf-worker-0", "uid-1")
    launch = PodLaunch(ref, (Container("main", (), image=image, args=("train.py",)),))
    with pytest.raises(LaunchError) as exc:
        plan_launch(
            launch,
            DeviceBinding(),
            home=tmp_path,
            gpus=(),
            visible_devices=lambda _: "",
            base_env={},
        )
    return f"cannot start: {exc.value}"


@pytest.mark.parametrize("image", [IMAGE, None])
def test_why_names_the_image_and_the_fix_for_the_pod_and_its_job(tmp_path: Path, image: str | None) -> None:
    message = _launch_error(tmp_path, image)
    assert "spec.containers[0].command: must be set" in message
    failed = pod("bad-worker-0", job="bad", phase="Failed", reason="Error", message=message)
    ex = explain(failed, WhyContext(pods=[failed]))
    assert ex.state == "Failed" and ex.reason == "Error"
    (hint,) = ex.unblock
    entrypoint = f"the entrypoint of image {image!r}" if image else "no image entrypoint either"
    assert hint == (
        f"worker-0 never started: spec.containers[0].command is not set and {entrypoint} does not "
        f"run on this runtime; {NO_COMMAND_HINT}, and re-apply"
    )
    job = ddp_job(
        "bad",
        conditions=[
            condition(
                "Failed",
                reason="ReplicaFailed",
                message=f"pod bad-worker-0 failed: Error: {message} (it could not start)",
                at="2025-01-01T00:01:00Z",
            )
        ],
    )
    job_ex = explain(job, WhyContext(job=job, pods=[failed]))
    assert job_ex.unblock[0] == hint
    if image:
        assert IMAGE in job_ex.failure.message

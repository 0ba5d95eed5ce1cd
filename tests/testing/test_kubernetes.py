"""Behaviour of the test control plane that needs no Kubernetes binaries."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from muster.testing.kube_kubelet import KubeletRole, stable_ip
from muster.testing.kubernetes import BUILD_HINT, ControlPlane, cache_dir, find_binaries


def test_missing_binaries_skip_with_the_build_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MUSTER_TEST_REQUIRE_ALL", raising=False)
    with pytest.raises(pytest.skip.Exception, match=r"run scripts/k8s-build\.sh"):
        ControlPlane(bin_dir=tmp_path).start()


def test_missing_binaries_fail_when_everything_is_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSTER_TEST_REQUIRE_ALL", "1")
    with pytest.raises(pytest.fail.Exception, match=re.escape(BUILD_HINT)):
        ControlPlane(bin_dir=tmp_path).start()


def test_binaries_are_found_in_the_cache_named_by_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUSTER_K8S_CACHE", str(tmp_path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)

    assert cache_dir() == tmp_path
    found = find_binaries()
    assert found is not None
    assert found.kube_apiserver == bin_dir / "kube-apiserver"
    assert found.kubemark is None  # optional

    (bin_dir / "kube-controller-manager").unlink()
    assert find_binaries() is None


def test_clients_need_a_started_plane() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        ControlPlane().kubeconfig()


@pytest.mark.parametrize(
    ("phase", "exit_code", "message"),
    [
        ("Done", None, "phase: must be one of Pending, Running, Succeeded, Failed, got 'Done'"),
        ("Running", 0, "exit_code: only a Succeeded or Failed pod has one, got 0 for Running"),
        ("Succeeded", 2, "exit_code: a Succeeded pod exits with 0, got 2; use phase='Failed'"),
        ("Failed", 0, "exit_code: a Failed pod exits non-zero, got 0; use phase='Succeeded'"),
    ],
)
def test_impossible_pod_statuses_are_refused_before_any_write(
    phase: str, exit_code: int | None, message: str
) -> None:
    class NoApi(KubeletRole):
        def core_api(self) -> None:
            raise AssertionError("the check must come before any API call")

    with pytest.raises(ValueError) as refused:
        NoApi().set_pod_status("ns", "pod", phase, exit_code)
    assert str(refused.value) == message


def test_stable_ips_are_deterministic_and_in_range() -> None:
    first = stable_ip("10.200", "node-a")
    assert first == stable_ip("10.200", "node-a")
    assert first.startswith("10.200.")
    octets = [int(part) for part in first.split(".")]
    assert 0 <= octets[2] <= 255 and 1 <= octets[3] <= 254

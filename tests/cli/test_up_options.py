"""`muster up` options that configure the manager."""

from __future__ import annotations

from pathlib import Path

from muster.cli import up
from muster.scheduler import PLACEMENT_POLICIES
from muster.testing.up import run_cli


def test_placement_choices_are_the_schedulers():
    assert up._PLACEMENTS == PLACEMENT_POLICIES


def test_muster_up_refuses_cluster_options_without_the_kubernetes_runtime(muster_home: Path) -> None:
    done = run_cli(muster_home, "up", "--kubeconfig", "/nowhere", "--runtime", "local")
    assert done.returncode == 2
    assert "--kubeconfig: only with --runtime kubernetes" in done.stderr
    missing = run_cli(muster_home, "up", "--runtime", "kubernetes", "--kubeconfig", "/nowhere")
    assert missing.returncode == 2
    assert "--kubeconfig /nowhere: no such file" in missing.stderr

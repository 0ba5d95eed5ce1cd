"""`muster up` options that configure the manager."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from muster.cli import up
from muster.cli.common import EXIT_BAD_INPUT
from muster.config import settings
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


def test_ray_options_reach_the_manager(tmp_path: Path):
    s = settings(home=tmp_path)
    config = up._manager_config("ray", None, "binpack", s, "auto", gang_timeout=7.5)
    assert config is not None
    assert (config.runtime, config.ray_address, config.gang_timeout_seconds) == ("ray", "auto", 7.5)


@pytest.mark.parametrize(
    ("runtime", "fake_gpus", "address", "message"),
    [
        ("ray", None, None, "--runtime ray needs --ray-address"),
        ("ray", "4", "auto", "--fake-gpus is for the local runtime"),
        ("ray", None, "ray://head:10001", "Ray Client (ray://) is not supported"),
        ("local", None, "auto", "--ray-address is for --runtime ray (not local)"),
        ("none", None, "auto", "--ray-address is for --runtime ray"),
    ],
)
def test_bad_ray_options_are_refused(
    tmp_path: Path, capsys, runtime: str, fake_gpus: str | None, address: str | None, message: str
):
    with pytest.raises(typer.Exit) as exc:
        up._manager_config(runtime, fake_gpus, "binpack", settings(home=tmp_path), address)
    assert exc.value.exit_code == EXIT_BAD_INPUT
    assert message in capsys.readouterr().err


def test_python_option_reaches_the_manager_resolved_and_bad_paths_are_refused(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MUSTER_PYTHON", raising=False)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    s = settings(home=tmp_path, python=venv)
    config = up._manager_config("local", None, "binpack", s, given_python=venv)
    assert config is not None and config.python == python
    assert up._manager_config("local", None, "binpack", settings(home=tmp_path)).python is None
    monkeypatch.setenv("MUSTER_PYTHON", str(python))  # the setting, as the option
    assert up._manager_config("local", None, "binpack", settings(home=tmp_path)).python == python
    for runtime, where, message in (
        ("local", tmp_path / "nowhere", "no such executable"),
        ("ray", python, "--python is for the local runtime, not ray"),
    ):
        with pytest.raises(typer.Exit) as exc:
            s = settings(home=tmp_path, python=where)
            up._manager_config(
                runtime, None, "binpack", s, "auto" if runtime == "ray" else None, given_python=where
            )
        assert exc.value.exit_code == EXIT_BAD_INPUT
        assert message in capsys.readouterr().err

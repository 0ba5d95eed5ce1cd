"""Volumes as directories under $MUSTER_HOME/volumes, reached through MUSTER_VOLUME_<NAME> and links."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from muster.runtime.base import Container, DeviceBinding, LaunchError, PodPhase, Volume, VolumeMount
from muster.runtime.local import records as records_module
from muster.runtime.local.records import private_dir, shm_root
from muster.runtime.local.volumes import volume_env_name
from muster.testing import wait_for
from tests.runtime.local.conftest import launch, py, run_pod

# Prints where MUSTER_VOLUME_* point and writes a file into each.
PROBE = """
import json, os
vols = {k: v for k, v in os.environ.items() if k.startswith("MUSTER_VOLUME_")}
for k, v in vols.items():
    with open(os.path.join(v, "written-by-" + os.environ["WHO"]), "w") as f:
        f.write("x")
print(json.dumps({"vols": vols, "cwd": os.getcwd()}))
"""


def _probe(runtime, name, volumes, mounts, uid=None, working_dir="", ns="default") -> dict:
    pod = launch(
        name,
        Container("main", py(PROBE), env={"WHO": name}, volume_mounts=tuple(mounts), working_dir=working_dir),
        volumes=tuple(volumes),
        uid=uid,
        ns=ns,
    )
    final = run_pod(runtime, pod)
    assert final.phase == PodPhase.SUCCEEDED, final.message
    return json.loads("".join(runtime.logs(pod.ref)))


class TestVolumeKinds:
    def test_pvc_is_shared_by_namespace_and_claim_and_outlives_pods(self, runtime, muster_home):
        pvc = [Volume("ckpt", "persistentVolumeClaim", claim_name="team-ckpt")]
        mount = [VolumeMount("ckpt", "/checkpoints")]
        first = _probe(runtime, "writer", pvc, mount)
        expected = muster_home / "volumes" / "pvc" / "default" / "team-ckpt"
        assert first["vols"] == {"MUSTER_VOLUME_CKPT": str(expected)}
        runtime.release(runtime.pods()[0].ref)
        _probe(runtime, "reader", pvc, mount)
        assert sorted(os.listdir(expected)) == ["written-by-reader", "written-by-writer"]
        other_ns = _probe(runtime, "elsewhere", pvc, mount, ns="team-b")
        assert other_ns["vols"]["MUSTER_VOLUME_CKPT"] == str(
            muster_home / "volumes" / "pvc" / "team-b" / "team-ckpt"
        )

    def test_empty_dir_is_per_pod_and_removed_on_release(self, runtime, muster_home):
        out = _probe(
            runtime, "scratch", [Volume("tmp", "emptyDir")], [VolumeMount("tmp", "/tmp/scratch")], uid="u-1"
        )
        directory = Path(out["vols"]["MUSTER_VOLUME_TMP"])
        assert directory == muster_home / "volumes" / "emptydir" / "u-1" / "tmp"
        assert (directory / "written-by-scratch").exists()
        runtime.release(runtime.pods()[0].ref)
        wait_for(lambda: not directory.exists(), timeout=10, what="the emptyDir to go")
        wait_for(
            lambda: not (muster_home / "volumes" / "workdir" / "u-1").exists(), timeout=10, what="workdir"
        )

    def test_memory_medium_lives_on_dev_shm_and_is_linked_from_the_volume_area(self, runtime, muster_home):
        if private_dir(shm_root()) is None:
            pytest.skip("/dev/shm is not writable here: the Memory medium falls back to disk (tested below)")
        out = _probe(
            runtime,
            "shm",
            [Volume("fast", "emptyDir", medium="Memory")],
            [VolumeMount("fast", "/dev/shm")],
            uid="u-shm",
        )
        directory = Path(out["vols"]["MUSTER_VOLUME_FAST"])
        assert directory == Path("/dev/shm") / f"muster-{os.getuid()}" / "u-shm" / "fast"
        assert (muster_home / "volumes" / "emptydir" / "u-shm" / "fast").resolve() == directory
        runtime.release(runtime.pods()[0].ref)
        wait_for(lambda: not directory.exists(), timeout=10, what="the memory emptyDir to go")

    def test_memory_medium_falls_back_to_disk_with_a_warning(
        self, runtime, muster_home, monkeypatch, tmp_path
    ):
        monkeypatch.setattr(records_module, "SHM", tmp_path / "no-shm")
        pod = launch(
            "noshm",
            Container("main", ("true",), volume_mounts=(VolumeMount("fast", "/x"),)),
            volumes=(Volume("fast", "emptyDir", medium="Memory"),),
        )
        warnings = runtime.start(pod, DeviceBinding())
        assert any("Memory medium is on disk" in w for w in warnings)

    def test_host_path_maps_into_the_volume_area_not_the_machine(self, runtime, muster_home):
        out = _probe(
            runtime,
            "host",
            [Volume("data", "hostPath", path="/data/imagenet")],
            [VolumeMount("data", "/data")],
        )
        assert out["vols"]["MUSTER_VOLUME_DATA"] == str(
            muster_home / "volumes" / "hostpath" / "data" / "imagenet"
        )
        assert not Path("/data/imagenet/written-by-host").exists()


class TestMounts:
    def test_mount_inside_the_working_dir_gets_a_link_and_sub_path_is_honoured(
        self, runtime, muster_home, tmp_path
    ):
        wd = tmp_path / "proj"
        vols = [Volume("ckpt", "persistentVolumeClaim", claim_name="c")]
        mounts = [
            VolumeMount("ckpt", str(wd / "out" / "ckpt"), sub_path="run-1"),
            VolumeMount("ckpt", "rel-link"),
        ]
        out = _probe(runtime, "links", vols, mounts, working_dir=str(wd))
        target = muster_home / "volumes" / "pvc" / "default" / "c" / "run-1"
        assert out["vols"] == {"MUSTER_VOLUME_CKPT": str(target)}
        assert (wd / "out" / "ckpt").is_symlink() and (wd / "out" / "ckpt").resolve() == target
        assert (wd / "rel-link").resolve() == muster_home / "volumes" / "pvc" / "default" / "c"

    def test_mount_at_the_working_dir_makes_the_volume_the_working_dir(self, runtime, muster_home):
        vols = [Volume("ws", "persistentVolumeClaim", claim_name="ws")]
        out = _probe(runtime, "ws", vols, [VolumeMount("ws", "/workspace")], working_dir="/workspace")
        assert out["cwd"] == str(muster_home / "volumes" / "pvc" / "default" / "ws")
        assert not Path("/workspace").exists()

    def test_mounts_outside_the_working_dir_touch_nothing_there(self, runtime):
        _probe(
            runtime, "outside", [Volume("d", "emptyDir")], [VolumeMount("d", "/data/never-created-by-muster")]
        )
        assert not Path("/data/never-created-by-muster").exists()

    def test_an_existing_file_at_the_link_is_left_alone_with_a_warning(self, runtime, tmp_path):
        wd = tmp_path / "wd"
        wd.mkdir()
        (wd / "data").write_text("mine")
        pod = launch(
            "clash",
            Container(
                "main", ("true",), working_dir=str(wd), volume_mounts=(VolumeMount("d", str(wd / "data")),)
            ),
            volumes=(Volume("d", "emptyDir"),),
        )
        warnings = runtime.start(pod, DeviceBinding())
        assert (wd / "data").read_text() == "mine"
        assert any("is not a link" in w and "$MUSTER_VOLUME_D" in w for w in warnings)

    def test_env_name_of_a_volume(self):
        assert volume_env_name("train-data.v2") == "MUSTER_VOLUME_TRAIN_DATA_V2"


class TestVolumeErrors:
    @pytest.mark.parametrize(
        ("volume", "path", "words"),
        [
            (Volume("h", "hostPath", path="relative/dir"), "spec.volumes[0].hostPath.path", "absolute"),
            (Volume("h", "hostPath", path="/data/../etc"), "spec.volumes[0].hostPath.path", "'..'"),
            (
                Volume("h", "hostPath", path="/etc/hosts", host_path_type="File"),
                "spec.volumes[0].hostPath.type",
                "'File'",
            ),
            (
                Volume("p", "persistentVolumeClaim", claim_name="../x"),
                "spec.volumes[0].persistentVolumeClaim.claimName",
                "plain name",
            ),
            (Volume("e", "emptyDir", medium="HugePages"), "spec.volumes[0].emptyDir.medium", "'HugePages'"),
        ],
    )
    def test_bad_volume_names_the_field(self, runtime, volume, path, words):
        pod = launch("bad", Container("main", ("true",)), volumes=(volume,))
        with pytest.raises(LaunchError) as err:
            runtime.start(pod, DeviceBinding())
        assert err.value.path == path and words in str(err.value)

    def test_sub_path_must_stay_inside_the_volume(self, runtime):
        pod = launch(
            "escape",
            Container("main", ("true",), volume_mounts=(VolumeMount("d", "/x", sub_path="../../etc"),)),
            volumes=(Volume("d", "emptyDir"),),
        )
        with pytest.raises(LaunchError, match=r"volumeMounts\[0\].subPath"):
            runtime.start(pod, DeviceBinding())

    def test_duplicate_volume_names(self, runtime):
        pod = launch(
            "dupvol", Container("main", ("true",)), volumes=(Volume("d", "emptyDir"), Volume("d", "emptyDir"))
        )
        with pytest.raises(LaunchError, match=r"spec.volumes\[1\].name: duplicate"):
            runtime.start(pod, DeviceBinding())

"""LocalRuntime with real processes: exit codes, environment, working directory, launch errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from muster.runtime.base import (
    Container,
    DeviceBinding,
    LaunchError,
    PodExists,
    PodNotFound,
    PodPhase,
    PodReason,
    PodStillRunning,
    Runtime,
    SupportsFaultInjection,
    SupportsGpuMetrics,
    SupportsLogs,
    SupportsReadoption,
    Volume,
    VolumeMount,
)
from muster.runtime.local.runtime import HomeInUse, LocalRuntime
from muster.testing import wait_for
from tests.runtime.local.conftest import PY, gated, launch, py, run_pod


class TestContract:
    def test_local_runtime_satisfies_the_protocol_and_its_capabilities(self, runtime):
        assert isinstance(runtime, Runtime)
        for capability in (SupportsLogs, SupportsReadoption, SupportsGpuMetrics, SupportsFaultInjection):
            assert isinstance(runtime, capability)

    def test_second_runtime_on_the_same_home_is_refused(self, runtime, muster_home):
        with pytest.raises(HomeInUse, match=f"pid {os.getpid()}"):
            LocalRuntime(muster_home)


class TestProcessStart:
    """How a container's process starts (``posix_spawn`` in the shim): as ``subprocess.Popen``
    started it, and as Kubernetes users expect of a container's main process."""

    def test_the_process_gets_stdio_only_and_a_process_group_of_its_own(self, runtime):
        code = (
            "import os, sys\n"
            "def is_open(fd):\n"
            "    try:\n"
            "        os.fstat(fd)\n"
            "        return True\n"
            "    except OSError:\n"
            "        return False\n"
            "print('fds', [fd for fd in range(3, 1024) if is_open(fd)])\n"
            "print('group', os.getpgid(0) == os.getpid(), 'stdin', repr(sys.stdin.read()))\n"
        )
        final = run_pod(runtime, launch("fds", Container("main", py(code))))
        assert final.phase == PodPhase.SUCCEEDED
        log = "".join(runtime.logs(final.ref))
        assert "fds []" in log  # not the runtime's pipe, the shim's lock or its log
        assert "group True stdin ''" in log

    def test_a_bare_name_is_looked_up_on_the_containers_own_path(self, runtime, tmp_path):
        bin_dir = tmp_path / "bin"
        bin_dir.mkdir()
        (bin_dir / "muster-hello").write_text("#!/bin/sh\necho hello from $0\n")
        (bin_dir / "muster-hello").chmod(0o755)
        pod = launch("path", Container("main", ("muster-hello",), env={"PATH": f"{bin_dir}:/usr/bin:/bin"}))
        final = run_pod(runtime, pod)
        assert final.phase == PodPhase.SUCCEEDED
        assert f"hello from {bin_dir}/muster-hello" in "".join(runtime.logs(final.ref))

    def test_sigpipe_has_its_default_action_in_the_process(self, runtime):
        # Python (the shim) ignores SIGPIPE, and an exec keeps what is ignored: a pipeline in the
        # container would then see EPIPE errors instead of ending quietly.
        # ($$ is Kubernetes' escape of $ in a command: the shell gets `kill -PIPE $$`.)
        pod = launch("pipe", Container("main", ("sh", "-c", "kill -PIPE $$$$; echo survived")))
        final = run_pod(runtime, pod)
        assert (final.exit_code, final.containers[0].signal) == (141, 13)
        assert "survived" not in "".join(runtime.logs(final.ref))


class TestExitStatus:
    def test_exit_zero_succeeds(self, runtime, watcher):
        pod = launch("ok", Container("main", py("print('hello')")))
        runtime.start(pod, DeviceBinding())
        final = watcher.wait_final(pod.ref)
        assert (final.phase, final.reason, final.exit_code) == (PodPhase.SUCCEEDED, PodReason.COMPLETED, 0)
        (c,) = final.containers
        assert c.state == "terminated" and c.exit_code == 0 and c.started_at and c.finished_at
        assert c.started_at <= c.finished_at

    def test_non_zero_exit_is_an_error_with_the_code(self, runtime):
        final = run_pod(runtime, launch("bad", Container("main", py("import sys; sys.exit(3)"))))
        assert (final.phase, final.reason, final.exit_code) == (PodPhase.FAILED, PodReason.ERROR, 3)
        assert "exited with code 3" in final.message and "'main'" in final.message

    def test_death_by_signal_is_128_plus_the_signal(self, runtime):
        final = run_pod(
            runtime,
            launch("segv", Container("main", py("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)"))),
        )
        (c,) = final.containers
        assert (c.exit_code, c.signal, c.reason) == (139, 11, PodReason.ERROR)
        assert "SIGSEGV" in c.message

    def test_missing_executable_fails_with_127_and_says_why(self, runtime):
        final = run_pod(runtime, launch("nocmd", Container("main", ("no-such-program-xyz", "--flag"))))
        assert (final.phase, final.reason, final.exit_code) == (PodPhase.FAILED, PodReason.ERROR, 127)
        assert "no-such-program-xyz" in final.message
        assert "cannot run 'no-such-program-xyz'" in "".join(runtime.logs(final.ref))

    def test_a_file_that_cannot_be_run_fails_with_126(self, runtime, tmp_path):
        script = tmp_path / "not-executable"
        script.write_text("#!/bin/sh\necho ran\n")
        final = run_pod(runtime, launch("noexec", Container("main", (str(script),))))
        assert (final.phase, final.exit_code) == (PodPhase.FAILED, 126)
        assert "Permission denied" in "".join(runtime.logs(final.ref))

    def test_running_is_reported_before_the_final_status(self, runtime, watcher, tmp_path):
        gate = tmp_path / "gate"
        pod = launch(
            "gated",
            Container("main", gated(gate)),
        )
        runtime.start(pod, DeviceBinding())
        running = watcher.wait_phase(pod.ref, PodPhase.RUNNING)
        assert running.reason is None and running.started_at and running.containers[0].pid
        gate.touch()
        watcher.wait_final(pod.ref)
        assert [c.phase for c in watcher.of(pod.ref)] == [PodPhase.RUNNING, PodPhase.SUCCEEDED]

    def test_poll_waits_for_a_change_and_wakes_when_one_comes(self, runtime, watcher, tmp_path):
        import time

        gate = tmp_path / "gate"
        pod = launch("wake", Container("main", gated(gate)))
        runtime.start(pod, DeviceBinding())
        watcher.wait_phase(pod.ref, PodPhase.RUNNING)
        t0 = time.monotonic()
        assert runtime.poll(0.3) == []  # nothing happens: it waited, then returned nothing
        assert time.monotonic() - t0 >= 0.25
        gate.touch()
        t0 = time.monotonic()
        changes = runtime.poll(60)
        assert [c.phase for c in changes] == [PodPhase.SUCCEEDED]
        assert time.monotonic() - t0 < 30  # woken by the shim's exit, not by the timeout

    def test_a_wake_returns_a_poll_at_once_whenever_it_came(self, runtime):
        import threading
        import time

        # Before the poll (many times over, as the manager's cache does for each write of a
        # pass): the next poll returns at once, and only that one.
        for _ in range(50):
            runtime.wake()
        t0 = time.monotonic()
        assert runtime.poll(30) == []
        assert time.monotonic() - t0 < 10
        t0 = time.monotonic()
        assert runtime.poll(0.3) == [] and time.monotonic() - t0 >= 0.25  # no wake left over
        # During the poll's wait, from another thread; then again, so none is lost.
        for _ in range(3):
            timer = threading.Timer(0.2, runtime.wake)
            timer.start()
            t0 = time.monotonic()
            assert runtime.poll(30) == []
            assert time.monotonic() - t0 < 10
            timer.join()

    def test_each_change_is_reported_once(self, runtime, watcher):
        pod = launch("once", Container("main", py("pass")))
        runtime.start(pod, DeviceBinding())
        watcher.wait_final(pod.ref)
        assert watcher.pump(0.0) == []
        assert [p.phase for p in runtime.pods()] == [PodPhase.SUCCEEDED]

    def test_pod_with_two_containers_ends_when_both_end_and_names_the_failure(
        self, runtime, watcher, tmp_path
    ):
        gate = tmp_path / "gate"
        pod = launch(
            "two",
            Container("fails", py("import sys; sys.exit(2)")),
            Container("waits", gated(gate)),
        )
        runtime.start(pod, DeviceBinding())
        wait_for(
            lambda: runtime._pods[pod.ref.uid].containers[0].files.status.exists(), 30, what="first exit"
        )
        watcher.pump(0.0)
        assert not any(c.final for c in watcher.of(pod.ref))  # one container still runs
        gate.touch()
        final = watcher.wait_final(pod.ref)
        assert (final.reason, final.exit_code) == (PodReason.ERROR, 2)
        assert final.message.startswith("container 'fails'")
        assert [c.reason for c in final.containers] == [PodReason.ERROR, PodReason.COMPLETED]


class TestEnvironment:
    def _env_of(self, runtime, pod, devices=None) -> dict[str, str]:
        final = run_pod(runtime, pod, devices)
        assert final.phase == PodPhase.SUCCEEDED, final.message
        return json.loads("".join(runtime.logs(pod.ref)))

    def test_env_passes_through_and_cuda_visible_devices_holds_the_bound_gpus(self, runtime, monkeypatch):
        dump = py("import json, os; print(json.dumps(dict(os.environ)))")
        pod = launch(
            "env",
            Container(
                "main",
                dump,
                env={
                    "RANK": "3",
                    "MASTER_ADDR": "127.0.0.1",
                    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
                    "GREETING": "rank $(RANK)",
                },
            ),
        )
        env = self._env_of(runtime, pod, DeviceBinding((1, 3)))
        assert env["RANK"] == "3" and env["MASTER_ADDR"] == "127.0.0.1"
        assert env["CUDA_VISIBLE_DEVICES"] == "1,3"  # the binding wins over what the pod asked
        assert env["GREETING"] == "rank 3"
        assert "PATH" in env  # the base environment is inherited

    def test_no_gpu_bound_hides_every_gpu_and_server_secrets_stay_out(self, muster_home, monkeypatch):
        monkeypatch.setenv("MUSTER_TOKEN", "secret-token")
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
        rt = LocalRuntime(muster_home)
        try:
            pod = launch(
                "nogpu", Container("main", py("import json, os; print(json.dumps(dict(os.environ)))"))
            )
            env = self._env_of(rt, pod)
        finally:
            rt.close()
        assert env["CUDA_VISIBLE_DEVICES"] == ""
        assert "MUSTER_TOKEN" not in env

    def test_command_and_args_expand_env_references_like_kubernetes(self, runtime):
        pod = launch(
            "expand",
            Container(
                "main",
                (PY, "-c"),
                args=("import sys; print(sys.argv[1:])", "$(WHO)", "$$(WHO)", "$(UNSET)"),
                env={"WHO": "world"},
            ),
        )
        run_pod(runtime, pod)
        assert "".join(runtime.logs(pod.ref)).strip() == "['world', '$(WHO)', '$(UNSET)']"

    def test_working_dir_is_used_and_created(self, runtime, tmp_path):
        wd = tmp_path / "project" / "sub"
        pod = launch("cwd", Container("main", py("import os; print(os.getcwd())"), working_dir=str(wd)))
        run_pod(runtime, pod)
        assert "".join(runtime.logs(pod.ref)).strip() == str(wd)

    def test_default_working_dir_is_a_per_pod_scratch_directory(self, runtime, muster_home):
        pod = launch("scratch", Container("main", py("import os; print(os.getcwd())")))
        run_pod(runtime, pod)
        assert "".join(runtime.logs(pod.ref)).strip() == str(
            muster_home / "volumes" / "workdir" / pod.ref.uid / "main"
        )


class TestLaunchErrors:
    @pytest.mark.parametrize(
        ("pod", "devices", "path", "words"),
        [
            (launch("x", Container("main")), DeviceBinding(), "spec.containers[0].command", "must be set"),
            (launch("x"), DeviceBinding(), "spec.containers", "at least one"),
            (
                launch("x", Container("a", ("true",)), Container("a", ("true",))),
                DeviceBinding(),
                "spec.containers[1].name",
                "duplicate",
            ),
            (
                launch("x", Container("main", ("true",))),
                DeviceBinding((7,)),
                "devices.gpus",
                "GPU 7 does not exist",
            ),
            (
                launch("x", Container("main", ("true",), limits={"memory": "lots"})),
                DeviceBinding(),
                "spec.containers[0].resources.limits.memory",
                "not a quantity",
            ),
            (
                launch("x", Container("main", ("true",), volume_mounts=(VolumeMount("data", "/data"),))),
                DeviceBinding(),
                "spec.containers[0].volumeMounts[0].name",
                "no volume named 'data'",
            ),
            (
                launch("x", Container("main", ("true",)), volumes=(Volume("cfg", "configMap"),)),
                DeviceBinding(),
                "spec.volumes[0]",
                "'configMap' is not supported",
            ),
            (
                launch("x", Container("main", ("true",), working_dir="rel/dir")),
                DeviceBinding(),
                "spec.containers[0].workingDir",
                "absolute",
            ),
        ],
    )
    def test_bad_launch_names_the_field_and_leaves_nothing(
        self, runtime, muster_home, pod, devices, path, words
    ):
        with pytest.raises(LaunchError) as err:
            runtime.start(pod, devices)
        assert err.value.path == path and words in str(err.value)
        assert not (muster_home / "run" / "local" / "pods" / "default").exists()
        assert runtime.pods() == []

    def test_a_pods_own_working_dir_that_cannot_be_made_fails_the_pod_saying_why(self, runtime, muster_home):
        # The shim makes it (off the control plane's thread): its failure is the pod's, told.
        (muster_home / "volumes").mkdir(parents=True, exist_ok=True)
        (muster_home / "volumes" / "workdir").write_text("not a directory")
        final = run_pod(runtime, launch("ownwd", Container("main", ("true",))))
        assert final.phase == PodPhase.FAILED and final.exit_code == 126
        assert "cannot make working directory" in final.message and "Not a directory" in final.message
        assert "muster: cannot make working directory" in "".join(runtime.logs(final.ref))

    def test_a_working_dir_that_cannot_be_made_is_a_launch_error(self, runtime, tmp_path, muster_home):
        (tmp_path / "a-file").write_text("")
        pod = launch("nowd", Container("main", ("true",), working_dir=str(tmp_path / "a-file" / "sub")))
        with pytest.raises(LaunchError, match="cannot create the pod's directories"):
            runtime.start(pod, DeviceBinding())
        assert runtime.pods() == [] and not (muster_home / "run" / "local" / "pods" / "default").exists()

    def test_same_uid_twice_and_same_name_while_running_are_refused(self, runtime, watcher, tmp_path):
        gate = tmp_path / "gate"
        c = Container("main", gated(gate))
        first = launch("dup", c, uid="u1")
        runtime.start(first, DeviceBinding())
        with pytest.raises(PodExists, match="already started"):
            runtime.start(first, DeviceBinding())
        with pytest.raises(PodExists, match="still running"):
            runtime.start(launch("dup", c, uid="u2"), DeviceBinding())
        gate.touch()
        watcher.wait_final(first.ref)
        runtime.start(launch("dup", Container("main", ("true",)), uid="u2"), DeviceBinding())  # now allowed

    def test_a_start_that_crashed_before_its_record_starts_afresh(self, runtime, watcher, muster_home):
        # The server died between making the pod's directory and writing pod.json: adoption
        # skips such a directory, so the next start must not be refused for it.
        pod = launch("half", Container("main", ("true",)), uid="u-half")
        (muster_home / "run" / "local" / "pods" / "default" / "half" / "u-half").mkdir(parents=True)
        runtime.start(pod, DeviceBinding())
        assert watcher.wait_final(pod.ref).phase.value == "Succeeded"

    def test_warnings_name_what_is_not_honoured(self, runtime):
        pod = launch(
            "warn",
            Container(
                "main",
                ("true",),
                image="pytorch/pytorch:2.3",
                limits={"cpu": "2"},
                volume_mounts=(VolumeMount("data", "/data", read_only=True),),
            ),
            volumes=(Volume("data", "emptyDir", size_limit="1Gi"),),
        )
        warnings = runtime.start(pod, DeviceBinding())
        text = "\n".join(warnings)
        assert "image 'pytorch/pytorch:2.3' is recorded but not used" in text
        assert "cpu limit 2 is not enforced" in text
        assert "readOnly mount of 'data' is not enforced" in text
        assert "sizeLimit 1Gi is not enforced" in text


class TestRelease:
    def test_release_forgets_a_final_pod_but_keeps_its_logs(self, runtime, muster_home):
        pod = launch("rel", Container("main", py("print('kept')")))
        run_pod(runtime, pod)
        pod_dir = muster_home / "run" / "local" / "pods" / "default" / "rel" / pod.ref.uid
        assert pod_dir.is_dir()
        runtime.release(pod.ref)
        assert runtime.pods() == []
        wait_for(lambda: not pod_dir.exists(), timeout=10, what="the released pod's records to go")
        assert "".join(runtime.logs(pod.ref)) == "kept\n"
        runtime.release(pod.ref)  # idempotent

    def test_release_of_a_running_pod_is_refused(self, runtime, tmp_path):
        gate = tmp_path / "gate"
        pod = launch(
            "busy",
            Container("main", gated(gate)),
        )
        runtime.start(pod, DeviceBinding())
        with pytest.raises(PodStillRunning, match="stop it"):
            runtime.release(pod.ref)
        gate.touch()

    def test_stop_and_logs_of_unknown_pods(self, runtime):
        from muster.runtime.base import PodRef, StopReason

        ghost = PodRef("default", "ghost", "nope")
        with pytest.raises(PodNotFound):
            runtime.stop(ghost, 1, StopReason.STOPPED)
        with pytest.raises(PodNotFound, match="no logs"):
            list(runtime.logs(ghost))


def test_shim_can_be_run_as_a_module(tmp_path):
    """The shim is what `python -m muster.runtime.local.shim` runs; its usage names its arguments."""
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "muster.runtime.local.shim", "--help"], capture_output=True, text=True
    )
    assert out.returncode == 0 and "pod_dir" in out.stdout and "--notify-fd" in out.stdout


def test_missing_spec_makes_the_shim_exit_with_a_message(tmp_path: Path):
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "muster.runtime.local.shim", str(tmp_path), "main"],
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0 and "no spec" in out.stderr

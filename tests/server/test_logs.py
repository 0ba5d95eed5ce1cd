"""GET .../pods/{name}/log: plain and followed, previous, tailLines, errors, auth, clean-up."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from muster.api.base import controller_ref
from muster.runtime.base import Container, DeviceBinding
from muster.runtime.local.logs import begin_log, container_log
from muster.runtime.local.runtime import LocalRuntime
from muster.sdk.errors import ApiError, ApiNotFound
from muster.server.logs import use_log_source
from muster.store import Store
from muster.testing import wait_for
from muster.testing.cluster import pod
from muster.testing.factories import training_job
from muster.testing.server import RunningServer, serve
from tests.runtime.local.conftest import gated, launch, py, shutdown


@pytest.fixture
def store(home_store: Store) -> Store:
    return home_store


@pytest.fixture
def server(store: Store) -> Iterator[RunningServer]:
    """The API on the test's MUSTER_HOME, with no runtime registered: it reads the files."""
    with serve(store) as running:
        yield running


@pytest.fixture
def runtime(muster_home: Path) -> Iterator[LocalRuntime]:
    rt = LocalRuntime(home=muster_home)
    yield rt
    shutdown(rt)


def write_log(home: Path, pod_name: str, text: str, container: str = "main", previous: bool = False) -> None:
    """Write a log file where the local runtime keeps it."""
    path = container_log(home, "default", pod_name, container, previous=previous)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class TestRead:
    def test_whole_log_tail_and_previous(self, server: RunningServer, muster_home: Path):
        write_log(muster_home, "p", "one\ntwo\nthree\nunfinished")
        write_log(muster_home, "p", "old\n", previous=True)
        with server.client() as client:
            assert list(client.logs("p")) == ["one\n", "two\n", "three\n", "unfinished"]
            assert list(client.logs("p", tail_lines=2)) == ["three\n", "unfinished"]
            assert list(client.logs("p", tail_lines=0)) == []
            assert list(client.logs("p", previous=True)) == ["old\n"]

    def test_a_log_is_served_only_while_the_object_that_owned_it_exists(
        self, server: RunningServer, store: Store, muster_home: Path
    ):
        """A job deleted and applied again under the same name: its pods have the same names,
        but the logs of the deleted job's pods are not the new job's logs or --previous."""
        first = store.create(training_job("mnist"))
        pod_name = "mnist-master-0"
        log = container_log(muster_home, "default", pod_name, "main")
        for text in ("first run\n", "second run\n"):
            begin_log(log, controller_ref(first))
            log.write_text(text)
        with server.client() as client:
            assert list(client.logs(pod_name)) == ["second run\n"]
            assert list(client.logs(pod_name, previous=True)) == ["first run\n"]
            store.delete("TrainingJob", "mnist", "default")
            again = store.create(training_job("mnist"))
            with pytest.raises(ApiNotFound, match=r"belongs to trainingjob/mnist .*, deleted since"):
                list(client.logs(pod_name))
            with pytest.raises(ApiNotFound, match=r"belongs to trainingjob/mnist .*, deleted since"):
                list(client.logs(pod_name, previous=True))
            begin_log(log, controller_ref(again))
            log.write_text("new job\n")
            assert list(client.logs(pod_name)) == ["new job\n"]
            with pytest.raises(ApiNotFound, match="no previous log"):
                list(client.logs(pod_name, previous=True))
            begin_log(log, controller_ref(again))
            log.write_text("restarted\n")
            assert list(client.logs(pod_name, previous=True)) == ["new job\n"]

    def test_containers_are_named_when_there_are_several(self, server: RunningServer, muster_home: Path):
        write_log(muster_home, "two", "a\n", container="a")
        write_log(muster_home, "two", "b\n", container="b")
        with server.client() as client:
            assert list(client.logs("two", container="b")) == ["b\n"]
            with pytest.raises(ApiNotFound, match="name one of: a, b"):
                client.logs("two").open()

    def test_errors(self, server: RunningServer, store: Store, muster_home: Path):
        store.create(pod("waiting", phase="Pending", node="node-a"))
        with server.client() as client:
            with pytest.raises(ApiNotFound, match="no pod ghost in namespace default either"):
                list(client.logs("ghost"))
            with pytest.raises(ApiError, match="is Pending: its containers have not started") as err:
                list(client.logs("waiting"))
            assert err.value.reason == "PodPending" and err.value.code == 400
            write_log(muster_home, "p", "x\n")
            with pytest.raises(ApiError, match="cannot be combined"):
                list(client.logs("p", follow=True, previous=True))

    def test_needs_a_token(self, server: RunningServer, muster_home: Path):
        write_log(muster_home, "p", "secret\n")
        resp = httpx.get(f"{server.url}/apis/muster.dev/v1/namespaces/default/pods/p/log")
        assert resp.status_code == 401 and "secret" not in resp.text


class TestFollow:
    def test_streams_a_running_container_until_it_ends(self, server, runtime, tmp_path: Path):
        gate = tmp_path / "gate"
        code = (
            "import os, time\nprint('first', flush=True)\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\n"
            "print('second', flush=True)"
        )
        p = launch("live", Container("main", py(code)))
        runtime.start(p, DeviceBinding())
        with server.client() as client:
            stream = client.logs("live", follow=True)
            assert next(stream) == "first\n"  # before the process ends
            gate.touch()
            assert list(stream) == ["second\n"]  # and the stream ends with it

    def test_tail_then_follow_repeats_nothing(self, server, runtime, tmp_path: Path):
        gate = tmp_path / "gate"
        code = (
            "import os, time\nfor i in range(5): print(i, flush=True)\n"
            f"while not os.path.exists({str(gate)!r}): time.sleep(0.02)\nprint('end', flush=True)"
        )
        p = launch("tailed", Container("main", py(code)))
        runtime.start(p, DeviceBinding())
        wait_for(lambda: "4\n" in "".join(runtime.logs(p.ref)), 30, what="the first lines")
        with server.client() as client:
            stream = client.logs("tailed", follow=True, tail_lines=2)
            assert [next(stream), next(stream)] == ["3\n", "4\n"]
            gate.touch()
            assert list(stream) == ["end\n"]

    def test_a_registered_runtime_serves_the_logs(self, store, runtime, muster_home: Path):
        from muster.server import Hook

        hook = Hook("runtime", start=lambda ctx: use_log_source(ctx.app, runtime))
        p = launch("via-runtime", Container("main", py("print('hello')")))
        runtime.start(p, DeviceBinding())
        wait_for(lambda: runtime.logs(p.ref) and "hello" in "".join(runtime.logs(p.ref)), 30, what="output")
        with serve(store, hooks=[hook]) as running, running.client() as client:
            assert list(client.logs("via-runtime", follow=True)) == ["hello\n"]

    def test_a_reader_that_leaves_ends_the_server_side_stream(self, server, runtime, tmp_path: Path):
        gate = tmp_path / "gate"
        p = launch("forever", Container("main", gated(gate)))
        runtime.start(p, DeviceBinding())
        with server.client() as client:
            stream = client.logs("forever", follow=True)
            assert next(stream) == "ready\n"
            wait_for(lambda: _log_threads() == 1, timeout=10, what="the server-side log stream")
            reader = threading.Thread(target=lambda: next(stream, None), daemon=True)
            reader.start()
            stream.close()
            reader.join(timeout=10)
        # The process still runs, but nobody reads: the pump notices and stops.
        wait_for(lambda: _log_threads() == 0, timeout=15, what="the server-side log stream to stop")
        gate.touch()


def _log_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "muster-log")

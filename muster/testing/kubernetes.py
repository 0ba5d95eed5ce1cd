"""A real Kubernetes control plane for tests: etcd, kube-apiserver and kube-controller-manager.

The binaries (Kubernetes v1.20.2) are built once by ``scripts/k8s-build.sh`` into
``~/.cache/muster/k8s-1.20.2/bin`` (``MUSTER_K8S_CACHE`` overrides the directory); a test
whose machine lacks them is skipped, or failed under ``MUSTER_TEST_REQUIRE_ALL=1``.

:class:`ControlPlane` runs every server on 127.0.0.1 with free ports, in a private directory:

* etcd, its data on tmpfs (``/dev/shm``) when there is one, since it fsyncs every write;
* kube-apiserver with TLS (a throw-away CA), static bearer tokens and RBAC authorization;
* optionally kube-controller-manager with only the controllers a test cluster needs
  (service accounts and their tokens, namespace deletion, garbage collection). Without it,
  the ServiceAccount admission plugin is disabled, or no Pod could be created.

There is no scheduler and no kubelet: Muster is the scheduler, and tests play the kubelet
through :meth:`ControlPlane.register_node`, :meth:`ControlPlane.set_node_ready` and
:meth:`ControlPlane.set_pod_status`, or run one kubemark hollow node (a real kubelet with a
fake container runtime) with :meth:`ControlPlane.hollow_node`.

Users (static tokens): ``admin`` (group ``system:masters``) and ``muster`` (no group, so a test
can check that Muster's ClusterRole alone grants what it needs).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import ssl
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from muster.testing import free_port, skip_or_fail, wait_for
from muster.testing.kube_files import KubeUser, make_pki, new_user, write_kubeconfig, write_token_file
from muster.testing.kube_hollow import run_hollow_node
from muster.testing.kube_kubelet import KubeletRole
from muster.testing.processes import ManagedProcess

__all__ = [
    "ADMIN",
    "BUILD_HINT",
    "DEFAULT_CONTROLLERS",
    "K8S_VERSION",
    "MUSTER",
    "Binaries",
    "ControlPlane",
    "NodeRegistry",
    "cache_dir",
    "find_binaries",
]

K8S_VERSION = "1.20.2"
BUILD_HINT = "Kubernetes control plane binaries not built: run scripts/k8s-build.sh"
ADMIN = "admin"
MUSTER = "muster"
# serviceaccount(-token): every namespace gets a `default` ServiceAccount with a token Secret,
# which the ServiceAccount admission plugin of 1.20 requires before it admits a Pod.
# namespace: deleting a namespace deletes its content. garbagecollector: ownerReferences cascade.
# No nodelifecycle controller on purpose: it would mark the API-registered nodes NotReady.
DEFAULT_CONTROLLERS = ("serviceaccount", "serviceaccount-token", "namespace", "garbagecollector")
SERVICE_CIDR = "10.0.0.0/24"
_KUBERNETES_SERVICE_IP = "10.0.0.1"
_CONTROLLER_MANAGER_USER = "system:kube-controller-manager"
_KUBELET_USER = "muster-hollow-kubelet"


@dataclass(frozen=True)
class Binaries:
    """Paths of the programs a control plane runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubemark: Path | None


def cache_dir() -> Path:
    """Where scripts/k8s-build.sh installs the binaries (under ``bin/``)."""
    override = os.environ.get("MUSTER_K8S_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "muster" / f"k8s-{K8S_VERSION}"


def find_binaries(bin_dir: Path | None = None) -> Binaries | None:
    """The binaries in ``bin_dir`` (default: the cache's ``bin/``), or None when one is missing.

    etcd may also come from PATH (Debian's etcd-server installs /usr/bin/etcd).
    """
    directory = bin_dir or cache_dir() / "bin"

    def program(name: str) -> Path | None:
        path = directory / name
        return path if path.is_file() and os.access(path, os.X_OK) else None

    etcd = program("etcd") or (Path(found) if (found := shutil.which("etcd")) else None)
    apiserver = program("kube-apiserver")
    controller_manager = program("kube-controller-manager")
    if etcd is None or apiserver is None or controller_manager is None:
        return None
    return Binaries(etcd, apiserver, controller_manager, program("kubemark"))


class ControlPlane(KubeletRole):
    """etcd + kube-apiserver (+ kube-controller-manager) on 127.0.0.1; a context manager.

    Besides clients it plays the kubelet (:class:`~muster.testing.kube_kubelet.KubeletRole`):
    ``register_node``, ``set_node_ready`` and ``set_pod_status``.

    ``users`` adds static-token users (name to groups) beside ``admin`` and ``muster``.
    ``workdir`` keeps logs, certificates and kubeconfigs there (it is left in place);
    by default a temporary directory is used and removed on :meth:`stop`.
    """

    def __init__(
        self,
        *,
        controller_manager: bool = True,
        controllers: Sequence[str] = DEFAULT_CONTROLLERS,
        users: Mapping[str, Sequence[str]] | None = None,
        bin_dir: Path | None = None,
        workdir: Path | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        self._with_controller_manager = controller_manager
        self._controllers = tuple(controllers)
        self._bin_dir = bin_dir
        self._given_workdir = workdir
        self._start_timeout = start_timeout
        self.users: dict[str, KubeUser] = {
            ADMIN: new_user(ADMIN, ["system:masters"]),
            MUSTER: new_user(MUSTER),
            _CONTROLLER_MANAGER_USER: new_user(_CONTROLLER_MANAGER_USER, ["system:masters"]),
            _KUBELET_USER: new_user(_KUBELET_USER, ["system:masters"]),
        }
        for name, groups in (users or {}).items():
            self.users[name] = new_user(name, groups)
        self.workdir: Path | None = None
        self.url = ""
        self.binaries: Binaries | None = None
        self._etcd_dir: Path | None = None
        self._etcd_url = ""
        self._processes: list[ManagedProcess] = []
        self._admin_api: Any = None
        # Seconds each server took from launch to ready (benchmarks/k8s_control_plane.py prints them).
        self.start_seconds: dict[str, float] = {}

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd, kube-apiserver and (unless disabled) kube-controller-manager; wait until ready.

        Skips the calling test (or fails it under ``MUSTER_TEST_REQUIRE_ALL=1``) when a binary,
        ``openssl`` or the ``kubernetes`` python package is missing.
        """
        if self.workdir is not None:
            raise RuntimeError("this ControlPlane was already started")
        self.binaries = _require_prerequisites(self._bin_dir)
        self.workdir = self._given_workdir or Path(tempfile.mkdtemp(prefix="muster-k8s-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        phases = [("etcd", self._start_etcd), ("kube-apiserver", self._start_apiserver)]
        if self._with_controller_manager:
            phases.append(("kube-controller-manager", self._start_controller_manager))
        try:
            for name, start_phase in phases:
                began = time.monotonic()
                start_phase()
                self.start_seconds[name] = time.monotonic() - began
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop every process this plane started (by PID, with children), newest first."""
        atexit.unregister(self.stop)
        if self._admin_api is not None:
            self._admin_api.api_client.close()
            self._admin_api = None
        while self._processes:
            self._processes.pop().stop()
        if self._etcd_dir is not None:
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
            self._etcd_dir = None
        if self.workdir is not None and self._given_workdir is None:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.url = ""

    # -- clients -----------------------------------------------------------------------------

    def kubeconfig(self, user: str = ADMIN) -> Path:
        """Path of a kubeconfig that reaches the API server as ``user``."""
        workdir = self._require_started()
        if user not in self.users:
            raise KeyError(f"user: unknown {user!r}; known users are {', '.join(sorted(self.users))}")
        path = workdir / "kubeconfig" / f"{user.replace(':', '_')}.yaml"
        if not path.exists():
            path.parent.mkdir(exist_ok=True)
            write_kubeconfig(path, self.url, workdir / "pki" / "ca.crt", self.users[user])
        return path

    def client(self, user: str = ADMIN) -> Any:
        """A new ``kubernetes.client.ApiClient`` for ``user``; close it (or use ``with``) when done."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig(user)))

    def admin_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` authenticated as ``admin`` (system:masters)."""
        return self.client(ADMIN)

    def core_api(self) -> Any:
        """A shared ``CoreV1Api`` as admin (closed on :meth:`stop`); the kubelet role writes through it."""
        self._require_started()
        if self._admin_api is None:
            from kubernetes import client

            self._admin_api = client.CoreV1Api(self.admin_client())
        return self._admin_api

    def create_namespace(self, name: str, labels: Mapping[str, str] | None = None) -> dict[str, Any]:
        """Create a namespace; with the controller manager, wait until Pods can be created in it
        (its ``default`` ServiceAccount has a token Secret)."""
        core = self.core_api()
        created = core.create_namespace({"metadata": {"name": name, "labels": dict(labels or {})}})
        if self._with_controller_manager:
            wait_for(
                lambda: _service_account_ready(core, name),
                timeout=60,
                what=f"the default ServiceAccount token of namespace {name}",
            )
        return core.api_client.sanitize_for_serialization(created)

    @contextlib.contextmanager
    def hollow_node(
        self,
        name: str,
        labels: Mapping[str, str] | None = None,
        capacity: Mapping[str, str | int] | None = None,
    ) -> Iterator[str]:
        """Run a kubemark hollow node ``name`` (a real kubelet, fake containers) while inside the block.

        At most one runs per machine (it uses fixed paths); this waits for the machine's turn.
        ``capacity`` adds extended resources (e.g. ``{"nvidia.com/gpu": 8}``) to what the fake
        machine reports (1 CPU, 3.75 GiB, 110 pods). The Node is deleted on exit.
        """
        workdir = self._require_started()
        binaries = self.binaries
        if binaries is None or binaries.kubemark is None:
            skip_or_fail(BUILD_HINT + " (kubemark is missing)")
        with run_hollow_node(
            self,
            binaries.kubemark,
            self.kubeconfig(_KUBELET_USER),
            workdir / f"hollow-{name}",
            name,
            labels or {},
            capacity or {},
        ):
            yield name

    # -- internals -----------------------------------------------------------------------------

    def _require_started(self) -> Path:
        if self.workdir is None or not self.url:
            raise RuntimeError("the control plane is not started: use `with ControlPlane() as plane:`")
        return self.workdir

    def _spawn(self, name: str, argv: Sequence[str]) -> ManagedProcess:
        assert self.workdir is not None
        env = dict(os.environ)
        # Every server talks to 127.0.0.1 only; a proxy configured for the outside must not apply.
        env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost"
        env.pop("KUBECONFIG", None)
        process = ManagedProcess(name, argv, self.workdir / f"{name}.log", env).start()
        self._processes.append(process)
        return process

    def _await(self, process: ManagedProcess, probe: Any, what: str) -> None:
        """Wait until ``probe()`` is truthy; fail at once, with the log, if the process dies."""
        try:
            wait_for(lambda: not process.running() or probe(), timeout=self._start_timeout, what=what)
        except TimeoutError as exc:
            raise RuntimeError(f"{exc}; {process.describe_failure()}") from None
        if not process.running():
            raise RuntimeError(f"{what}: {process.describe_failure()}")

    def _start_etcd(self) -> None:
        assert self.binaries is not None and self.workdir is not None
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self.workdir
        self._etcd_dir = Path(tempfile.mkdtemp(prefix="muster-etcd-", dir=base))
        client_url = f"http://127.0.0.1:{free_port()}"
        peer_url = f"http://127.0.0.1:{free_port()}"
        process = self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=muster-test",
                f"--data-dir={self._etcd_dir}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=muster-test={peer_url}",
                "--logger=zap",
                "--log-outputs=stderr",
                "--log-level=warn",
            ],
        )
        self._etcd_url = client_url
        self._await(
            process,
            lambda: httpx.get(f"{client_url}/health", timeout=2).json().get("health") == "true",
            "etcd /health",
        )

    def _start_apiserver(self) -> None:
        assert self.binaries is not None and self.workdir is not None
        pki = make_pki(
            self.workdir / "pki",
            ["127.0.0.1", _KUBERNETES_SERVICE_IP],
            ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"],
        )
        tokens = write_token_file(self.workdir / "tokens.csv", self.users.values())
        port = free_port()
        argv = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self._etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port}",
            "--insecure-port=0",
            f"--cert-dir={self.workdir / 'apiserver-certs'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            "--allow-privileged=true",
            "--profiling=false",
        ]
        if not self._with_controller_manager:
            # Nothing would create the `default` ServiceAccount that this plugin insists on.
            argv.append("--disable-admission-plugins=ServiceAccount")
        process = self._spawn("kube-apiserver", argv)
        self.url = f"https://127.0.0.1:{port}"
        context = ssl.create_default_context(cafile=str(pki.ca_cert))
        headers = {"Authorization": f"Bearer {self.users[ADMIN].token}"}
        self._await(
            process,
            lambda: (
                httpx.get(f"{self.url}/readyz", headers=headers, verify=context, timeout=5).status_code == 200
            ),
            "kube-apiserver /readyz",
        )

    def _start_controller_manager(self) -> None:
        assert self.binaries is not None and self.workdir is not None
        process = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={self.kubeconfig(_CONTROLLER_MANAGER_USER)}",
                f"--controllers={','.join(self._controllers)}",
                f"--service-account-private-key-file={self.workdir / 'pki' / 'service-account.key'}",
                f"--root-ca-file={self.workdir / 'pki' / 'ca.crt'}",
                "--use-service-account-credentials=false",
                "--leader-elect=false",
                "--port=0",
                "--secure-port=0",
                "--profiling=false",
            ],
        )
        # Ready once the service-account controllers have done their work for `default`.
        core = self.core_api()
        self._await(
            process, lambda: _service_account_ready(core, "default"), "the default ServiceAccount token"
        )


class NodeRegistry:
    """Registers nodes with unique names on the session's plane; deletes them afterwards."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.names: list[str] = []

    def add(
        self,
        stem: str = "gpu",
        gpus: int = 4,
        labels: Mapping[str, str] | None = None,
        **capacity: str | int,
    ) -> str:
        name = f"{stem}-{secrets.token_hex(3)}"
        resources: dict[str, str | int] = {"cpu": "32", "memory": "256Gi", **capacity}
        if gpus:
            resources["nvidia.com/gpu"] = gpus
        gfd = {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": "81920"}
        self.plane.register_node(name, resources, labels={**(gfd if gpus else {}), **(labels or {})})
        self.names.append(name)
        return name

    def delete_all(self) -> None:
        from kubernetes.client.exceptions import ApiException

        core = self.plane.core_api()
        for name in self.names:
            try:
                core.delete_node(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise


def _require_prerequisites(bin_dir: Path | None) -> Binaries:
    binaries = find_binaries(bin_dir)
    if binaries is None:
        skip_or_fail(f"{BUILD_HINT} (looked in {bin_dir or cache_dir() / 'bin'})")
    if shutil.which("openssl") is None:
        skip_or_fail("openssl is not installed (needed for the test control plane's certificates)")
    try:
        import kubernetes  # noqa: F401
    except ImportError:
        skip_or_fail("the kubernetes python client is not installed: pip install -e '.[k8s]'")
    return binaries


def _service_account_ready(core: Any, namespace: str) -> bool:
    from kubernetes.client.exceptions import ApiException

    try:
        account = core.read_namespaced_service_account("default", namespace)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    return bool(account.secrets)

"""``muster up``: the control plane in the foreground: the API server, the defaults, and the
manager (controllers, scheduler loop and runtime) through the server's start-up hooks.

It binds 127.0.0.1 unless told otherwise, creates the admin token on first start, and
writes ``$MUSTER_HOME/server.json`` once it listens so the CLI finds it; the file is removed
at a clean exit. Ctrl-C (or SIGTERM) stops it gracefully.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from muster import __version__
from muster.cli.app import app, err_console
from muster.cli.common import EXIT_BAD_INPUT, fail
from muster.config import Settings, settings

if TYPE_CHECKING:
    import uvicorn

    from muster.controllers.manager import ManagerConfig
    from muster.runtime.kubernetes.config import KubernetesConfig
    from muster.store import Store

__all__ = ["up"]

DEFAULT_PORT = 7070
DEFAULT_GATEWAY_PORT = 7071
# The scheduler's placement policies (muster.scheduler.PLACEMENT_POLICIES), listed here so the
# help text does not import the scheduler (and NumPy) for every command.
_PLACEMENTS = ("binpack", "spread", "bestfit", "dotprod", "gpu-packing", "gpu-clustering", "fgd", "random")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")
_GC_YOUNG = 50_000  # surviving containers between young collections (the default is 700)


@app.command()
def up(
    port: Annotated[
        int, typer.Option("--port", "-p", min=1, max=65535, help="Port to listen on.")
    ] = DEFAULT_PORT,
    host: Annotated[
        str,
        typer.Option("--host", help="Address to bind; anything but loopback exposes the API to the network."),
    ] = "127.0.0.1",
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="Store URL: sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB "
            "(default: $MUSTER_STORE, then sqlite:///$MUSTER_HOME/muster.db).",
            show_default=False,
        ),
    ] = None,
    home: Annotated[
        Path | None,
        typer.Option(
            "--home", help="Muster's directory (default: $MUSTER_HOME, then ~/.muster).", show_default=False
        ),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="uvicorn log level.")] = "info",
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime",
            help="Where pods run: local (processes on this machine), kubernetes (Pods of a cluster, "
            "Muster as its batch scheduler), ray (actors on the Ray cluster at --ray-address) or none "
            "(the API server only: no controllers, scheduling or pods).",
        ),
    ] = "local",
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            "--kubeconfig",
            help="With --runtime kubernetes: the kubeconfig (default: $KUBECONFIG, then ~/.kube/config; "
            "inside a pod, its service account).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            help="With --runtime kubernetes: the kubeconfig context (default: its current context).",
            show_default=False,
        ),
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="The Ray cluster of --runtime ray: its GCS address HOST:PORT, or auto (the cluster "
            "`ray start` made this machine part of).",
            show_default=False,
        ),
    ] = None,
    fake_gpus: Annotated[
        str | None,
        typer.Option(
            "--fake-gpus",
            help="Declare N virtual GPUs, N[:MODEL[:MEMORY]] (e.g. 4 or 4:A100:80Gi), for machines "
            "without GPUs.",
            show_default=False,
        ),
    ] = None,
    placement: Annotated[
        str,
        typer.Option("--placement", help=f"Placement policy of the scheduler: {', '.join(_PLACEMENTS)}."),
    ] = "binpack",
    gateway_port: Annotated[
        int,
        typer.Option(
            "--gateway-port",
            min=0,
            max=65535,
            help="Port of the serving gateway (the OpenAI API of InferenceServices); 0 turns it off.",
        ),
    ] = DEFAULT_GATEWAY_PORT,
    gateway_host: Annotated[
        str | None,
        typer.Option(
            "--gateway-host", help="Address the gateway binds (default: --host).", show_default=False
        ),
    ] = None,
    gang_timeout: Annotated[
        float,
        typer.Option(
            "--gang-timeout",
            min=0.1,
            help="Seconds a runtime that starts gangs as one unit (ray, kubernetes) may take to place "
            "one before the Workload is requeued (GangStartFailed).",
        ),
    ] = 60.0,
    python: Annotated[
        Path | None,
        typer.Option(
            "--python",
            help="The Python local pods run as `python`/`python3`: an interpreter or a virtual "
            "environment (default: $MUSTER_PYTHON, then this server's own virtual environment "
            "when it runs in one).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the Muster control plane in the foreground."""
    # Imported here: the server, database drivers and uvicorn would slow every other command.
    import uvicorn

    from muster.server import create_app
    from muster.server.auth import load_or_create_credentials
    from muster.server.hooks import GatewayConfig, server_hooks
    from muster.store import StoreError, open_store

    s = settings(home=home, store=store, python=python)
    # The server keeps what it reads (the cache) and frees the rest by reference counting: a
    # collection every 700 surviving containers (the default) mostly walks young objects that
    # are about to be freed anyway, and promotes enough of them to start a full collection
    # every few seconds. 1,000 one-pod jobs: 0.52 s of collections (6 full) -> 0.20 s (1 full).
    gc.set_threshold(_GC_YOUNG, 20, 10)
    cluster = _cluster(runtime, kubeconfig, context)
    manager = _manager_config(runtime, fake_gpus, placement, s, ray_address, gang_timeout, cluster, python)
    s.home.mkdir(parents=True, exist_ok=True)
    _check_port(host, port)
    if manager is not None and manager.runtime == "local":
        _check_home(s.home)
    gateway = None
    if manager is not None and gateway_port:
        gateway = GatewayConfig(host=gateway_host or host, port=gateway_port)
        _check_port(gateway.host, gateway.port)
    creds = load_or_create_credentials(s.credentials_path)
    try:
        opened = open_store(s.store_url, max_object_bytes=s.max_object_bytes)
    except (StoreError, ValueError) as exc:
        fail(
            f"cannot open the store {_redacted(s.store_url)}: {exc}",
            EXIT_BAD_INPUT if isinstance(exc, ValueError) else 1,
        )
    except Exception as exc:  # a database that refuses connections, a locked file, ...
        fail(f"cannot open the store {_redacted(s.store_url)}: {type(exc).__name__}: {exc}")
    url = f"http://{_url_host(host)}:{port}"
    if host not in _LOOPBACK:
        err_console.print(
            f"warning: listening on {host}: the API is reachable from the network (token required)"
        )
    serving = ""
    if gateway is not None:
        where = f"http://{_url_host(gateway.host)}:{gateway.port}/v1"
        serving = f"\n  gateway: {where} (the OpenAI API of InferenceServices)"
    err_console.print(
        f"Muster {__version__} at {url}\n  store: {_redacted(s.store_url)}\n"
        f"  token: {s.credentials_path} (`muster token show` prints it)\n"
        f"  dashboard: {url}/ (sign in with the token){serving}",
        markup=False,
    )
    application = create_app(
        opened,
        [creds.token],
        hooks=server_hooks(manager, gateway),
        home=s.home,
        max_request_bytes=s.max_request_bytes,
    )
    config = uvicorn.Config(
        application,
        host=host,
        port=port,
        log_level=log_level,
        # Open watches would hold shutdown forever; they are cut after this many seconds.
        timeout_graceful_shutdown=3,
        access_log=log_level == "debug",
    )
    server = _server(config, s, url, lambda: _no_gpu_notice(opened))
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then re-raises the signal with the
    # handler it found; this one unwinds through the `finally` below instead of dying there.
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        server.run()
    except (KeyboardInterrupt, _Terminated):
        pass
    except SystemExit:  # uvicorn's way of saying start-up failed; the reason is logged above
        raise typer.Exit(1) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
        opened.close()
        _remove_server_file(s, url)


def _cluster(runtime: str, kubeconfig: Path | None, context: str | None) -> KubernetesConfig | None:
    """The cluster of ``--runtime kubernetes``; its options with another runtime are a mistake."""
    from muster.runtime.kubernetes.config import KubernetesConfig

    if runtime != "kubernetes":
        given = [name for name, value in (("--kubeconfig", kubeconfig), ("--context", context)) if value]
        if given:
            fail(f"{' and '.join(given)}: only with --runtime kubernetes", EXIT_BAD_INPUT)
        return None
    if kubeconfig is not None and not kubeconfig.is_file():
        fail(f"--kubeconfig {kubeconfig}: no such file", EXIT_BAD_INPUT)
    return KubernetesConfig(kubeconfig=kubeconfig, context=context)


def _manager_config(
    runtime: str,
    fake_gpus: str | None,
    placement: str,
    s: Settings,
    ray_address: str | None = None,
    gang_timeout: float = 60.0,
    cluster: KubernetesConfig | None = None,
    given_python: Path | None = None,
) -> ManagerConfig | None:
    """The manager's settings from the options; bad values fail here, before anything starts."""
    from muster.controllers.manager import RUNTIMES, ManagerConfig
    from muster.runtime.local.fake import FakeGpuSpecError, parse_fake_gpus

    if runtime == "none":
        if fake_gpus:
            fail("--fake-gpus needs a runtime: drop --runtime none", EXIT_BAD_INPUT)
        if ray_address:
            fail("--ray-address is for --runtime ray", EXIT_BAD_INPUT)
        return None
    if runtime not in RUNTIMES:
        fail(f"--runtime {runtime!r} is unknown; use one of {', '.join((*RUNTIMES, 'none'))}", EXIT_BAD_INPUT)
    if runtime == "ray":
        _check_ray(ray_address, fake_gpus)
    elif ray_address:
        fail(f"--ray-address is for --runtime ray (not {runtime})", EXIT_BAD_INPUT)
    if placement not in _PLACEMENTS:
        fail(f"--placement {placement!r} is unknown; use one of {', '.join(_PLACEMENTS)}", EXIT_BAD_INPUT)
    if fake_gpus:
        try:
            parse_fake_gpus(fake_gpus)
        except FakeGpuSpecError as exc:
            fail(str(exc), EXIT_BAD_INPUT)
    if fake_gpus and runtime == "kubernetes":
        fail("--fake-gpus: the kubernetes runtime's GPUs are its Nodes'; drop --fake-gpus", EXIT_BAD_INPUT)
    python = _pod_python(s.python, runtime, explicit=given_python is not None)
    return ManagerConfig(
        runtime=runtime,
        fake_gpus=fake_gpus,
        placement=placement,
        home=s.home,
        ray_address=ray_address,
        gang_timeout_seconds=gang_timeout,
        kubernetes=cluster,
        event_ttl_seconds=s.event_ttl_seconds,
        events_per_object=s.events_per_object,
        finished_pod_limit=s.finished_pod_limit,
        python=python,
        freeze_gc=True,
    )


def _pod_python(python: Path | None, runtime: str, *, explicit: bool) -> Path | None:
    """The interpreter of --python (or MUSTER_PYTHON), checked before anything starts."""
    from muster.runtime.local.launch import resolve_python

    if python is None or runtime != "local":
        if explicit:
            fail(f"--python is for the local runtime, not {runtime}", EXIT_BAD_INPUT)
        return None
    try:
        return resolve_python(python)
    except ValueError as exc:
        fail(f"--python {exc}", EXIT_BAD_INPUT)


def _check_ray(address: str | None, fake_gpus: str | None) -> None:
    if not address:
        fail("--runtime ray needs --ray-address HOST:PORT (the Ray head's GCS) or auto", EXIT_BAD_INPUT)
    if address.startswith("ray://"):
        # Ray Client proxies the driver through the head: the runtime's long polls and node
        # table reads need a driver every Ray node can reach.
        fail(
            f"--ray-address {address}: Ray Client (ray://) is not supported; run muster up on a "
            "node of the Ray cluster (e.g. in the head pod) with --ray-address auto (docs/ray.md)",
            EXIT_BAD_INPUT,
        )
    if fake_gpus:
        fail(
            "--fake-gpus is for the local runtime; Ray nodes declare their GPUs "
            "(ray start --num-gpus N --resources '{\"accelerator_type:A100\": 1}')",
            EXIT_BAD_INPUT,
        )
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        fail("--runtime ray needs Ray in this environment: pip install 'muster[ray]'", EXIT_BAD_INPUT)


class _Terminated(Exception):
    pass


def _terminate(_sig: int, _frame: object) -> None:
    raise _Terminated


def _server(config: uvicorn.Config, s: Settings, url: str, ready: Callable[[], None]) -> uvicorn.Server:
    """A uvicorn.Server that writes server.json once it listens (not before: a CLI that
    reads the file must find a server that answers), then calls ``ready``."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                _write_server_file(s, url)
                ready()

    return Server(config)


def _no_gpu_notice(store: Store) -> None:
    """Say so when the registered nodes have no GPU: jobs asking for GPUs would wait forever."""
    from muster.controllers.insight.explain.rootcause import no_gpus

    cause = no_gpus(store.list("Node").items)
    if cause is not None:
        err_console.print(
            f"warning: no GPU found: {cause.message}; jobs that ask for nvidia.com/gpu will wait.\n"
            f"  To use GPUs: {cause.action}",
            markup=False,
        )


def _check_port(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            fail(
                f"cannot listen on {host}:{port}: {exc.strerror}; is another `muster up` running? "
                "Choose another port with --port",
            )


def _check_home(home: Path) -> None:
    from muster.runtime.local.runtime import HomeInUse, check_home_free

    try:
        check_home_free(home)
    except HomeInUse as exc:
        fail(str(exc))


def _write_server_file(s: Settings, url: str) -> None:
    tmp = s.server_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"url": url, "pid": os.getpid()}) + "\n")
    tmp.replace(s.server_file)


def _remove_server_file(s: Settings, url: str) -> None:
    try:
        current = json.loads(s.server_file.read_text())
    except (OSError, ValueError):
        return
    # Only our own: a second server on another port may have written it since.
    if current.get("url") == url and current.get("pid") == os.getpid():
        s.server_file.unlink(missing_ok=True)


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url

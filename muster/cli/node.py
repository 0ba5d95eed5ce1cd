"""``muster node cordon|uncordon|drain NAME``, ``muster node inject-fault NAME`` and
``muster node interrupt NAME`` (testing and drills).

Cordon and drain are declarative, as the rest of Muster: the command writes what it wants
on the Node (``spec.unschedulable``; for a drain also the annotations
``muster.dev/drain`` and ``muster.dev/drain-grace-seconds``) and the control plane acts on it
(docs/operations.md): a drained node's jobs are evicted (their pods stopped with reason
Evicted within the grace period) and requeued to run elsewhere. ``drain`` then waits until
no pod runs on the node.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from muster.api.labels import DRAIN_ANNOTATION, DRAIN_GRACE_ANNOTATION
from muster.api.lifecycle import is_final
from muster.api.quantity import Quantity, QuantityError
from muster.cli.app import app, console
from muster.cli.common import BadInput, ServerOpt, TokenOpt, connect, fail, handle_errors
from muster.sdk.client import Client
from muster.sdk.errors import ObjectConflict

__all__ = ["node_app"]

node_app = typer.Typer(
    name="node",
    help="Cordon, uncordon and drain nodes; spot notices and GPU faults for drills.",
    no_args_is_help=True,
)
app.add_typer(node_app)

NameArg = Annotated[str, typer.Argument(help="The node's name (muster get nodes).")]
_POLL = 0.5


@node_app.command()
def cordon(name: NameArg, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Mark the node unschedulable: nothing new is placed there; what runs keeps running."""
    with handle_errors(), connect(server, token) as client:
        _edit(client, name, lambda node: node["spec"].__setitem__("unschedulable", True))
        console.print(f"node/{name} cordoned")


@node_app.command()
def uncordon(name: NameArg, server: ServerOpt = None, token: TokenOpt = None) -> None:
    """Make the node schedulable again (and end a drain)."""

    def edit(node: dict[str, Any]) -> None:
        node["spec"]["unschedulable"] = False
        for key in (DRAIN_ANNOTATION, DRAIN_GRACE_ANNOTATION):
            (node["metadata"].get("annotations") or {}).pop(key, None)

    with handle_errors(), connect(server, token) as client:
        _edit(client, name, edit)
        console.print(f"node/{name} uncordoned")


@node_app.command()
def drain(
    name: NameArg,
    grace_period: Annotated[
        float | None,
        typer.Option(
            "--grace-period",
            min=0,
            help="Seconds each pod gets between SIGTERM and SIGKILL (default: the pod's own).",
        ),
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", min=0, help="Give up waiting after this many seconds (0: forever).")
    ] = 300.0,
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="Wait until no pod runs on the node.")
    ] = True,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """Cordon the node and evict what runs there: its jobs are requeued and run elsewhere."""

    def edit(node: dict[str, Any]) -> None:
        node["spec"]["unschedulable"] = True
        annotations = node["metadata"].setdefault("annotations", {})
        annotations[DRAIN_ANNOTATION] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if grace_period is None:
            annotations.pop(DRAIN_GRACE_ANNOTATION, None)
        else:
            annotations[DRAIN_GRACE_ANNOTATION] = f"{grace_period:g}"

    with handle_errors(), connect(server, token) as client:
        _edit(client, name, edit)
        console.print(f"node/{name} cordoned; evicting its pods")
        if not wait:
            return
        deadline = time.monotonic() + timeout if timeout else None
        shown = -1
        while True:
            left = _pods_on(client, name)
            if not left:
                console.print(f"node/{name} drained")
                return
            if len(left) != shown:
                shown = len(left)
                console.print(f"waiting for {shown} pod(s) to stop: {', '.join(left[:5])}")
            if deadline is not None and time.monotonic() >= deadline:
                fail(f"node/{name}: {shown} pod(s) still running after {timeout:g}s: {', '.join(left)}")
            time.sleep(_POLL)


@node_app.command("inject-fault")
def inject_fault(
    name: NameArg,
    gpu: Annotated[int, typer.Option("--gpu", min=0, help="Index of the GPU.")],
    xid: Annotated[
        int | None, typer.Option("--xid", min=1, help="Report an XID error (79: fell off the bus).")
    ] = None,
    lost: Annotated[bool, typer.Option("--lost", help="The GPU falls off the bus.")] = False,
    clear: Annotated[bool, typer.Option("--clear", help="Forget injected faults: healthy again.")] = False,
    utilization: Annotated[
        float | None, typer.Option("--utilization", min=0, max=1, help="Utilisation it reports (0 to 1).")
    ] = None,
    memory_used: Annotated[
        str | None, typer.Option("--memory-used", help="Memory in use it reports, e.g. 10Gi.")
    ] = None,
    temperature: Annotated[float | None, typer.Option("--temperature", help="Temperature (Celsius).")] = None,
    power: Annotated[float | None, typer.Option("--power", min=0, help="Power draw (watts).")] = None,
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """TESTING ONLY: make a fake GPU (muster up --fake-gpus) fail or report readings."""
    body: dict[str, Any] = {"gpu": gpu, "lost": lost, "clear": clear}
    for key, value in (
        ("xid", xid),
        ("utilization", utilization),
        ("temperatureCelsius", temperature),
        ("powerWatts", power),
    ):
        if value is not None:
            body[key] = value
    with handle_errors():
        if memory_used is not None:
            body["memoryUsedBytes"] = _bytes(memory_used)
        with connect(server, token) as client:
            answer = client.inject_fault(name, body)
    device = answer["gpu"]
    state = device["health"] + (f" ({device['healthReason']})" if device.get("healthReason") else "")
    console.print(f"node/{name} GPU {device['index']} ({device['uuid']}): {state}", markup=False)


@node_app.command()
def interrupt(
    name: NameArg,
    in_seconds: Annotated[
        float, typer.Option("--in", min=0, help="Seconds until the provider takes the node back [120].")
    ] = 120.0,
    action: Annotated[str, typer.Option("--action", help="terminate, stop or hibernate.")] = "terminate",
    server: ServerOpt = None,
    token: TokenOpt = None,
) -> None:
    """TESTING AND DRILLS: a spot interruption notice for a pool node, as the cloud's warning.

    The node is cordoned, its jobs get SIGTERM now (they checkpoint) and are requeued ahead of
    newer work; the autoscaler asks for a replacement; the node goes at the notice's time."""
    with handle_errors(), connect(server, token) as client:
        answer = client.interrupt_node(name, {"inSeconds": in_seconds, "action": action})
    when = answer["interruption"]["terminationTime"]
    console.print(
        f"node/{name} (pool {answer['nodePool']}, claim {answer['nodeClaim']}): {action} at {when}; "
        f"its jobs are moved off",
        markup=False,
    )


def _edit(client: Client, name: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """Apply ``change`` to the node, again on a fresh copy when the control plane wrote meanwhile."""
    for _ in range(10):
        node = copy.deepcopy(client.get("Node", name))
        node.setdefault("spec", {})
        change(node)
        try:
            return client.update(node)
        except ObjectConflict:
            continue
    fail(f"node/{name} keeps changing; try again")


def _pods_on(client: Client, node: str) -> list[str]:
    return sorted(
        f"{p['metadata'].get('namespace')}/{p['metadata']['name']}"
        for p in client.list("Pod")["items"]
        if (p.get("spec") or {}).get("nodeName") == node and not is_final(p)
    )


def _bytes(text: str) -> int:
    try:
        return Quantity.parse(text).as_int()
    except (QuantityError, ValueError):
        raise BadInput([f"error: --memory-used {text!r} is not a quantity; write it like 10Gi"]) from None

"""``muster suspend job/NAME`` and ``muster resume job/NAME``: set ``spec.runPolicy.suspend``.

The write carries the resourceVersion it read (optimistic concurrency): when the job changed
in between, the command reads it again and retries, so it never overwrites someone else's
change. The TrainingJob controller does the rest (a suspended job's Workload is deactivated
and its pods stopped; a resumed one queues again); ``--wait`` waits until it has.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Annotated, Any

import typer

from muster.api.lifecycle import JobPhase, job_phase
from muster.cli.app import app, console
from muster.cli.common import (
    BadInput,
    NamespaceOpt,
    ServerOpt,
    TokenOpt,
    connect,
    fail,
    handle_errors,
    resolve_target,
)
from muster.sdk.client import Client
from muster.sdk.errors import ObjectConflict

__all__ = ["resume", "set_suspend", "suspend"]

_RETRIES = 5
_WAIT_POLL_S = 0.25

WaitOpt = Annotated[bool, typer.Option("--wait", help="Wait until the controller reports the new state.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=0, help="Seconds --wait waits at most.")]


def _command(value: bool, doc: str) -> Callable[..., None]:
    """The command that sets suspend to ``value`` (suspend and resume differ in nothing else)."""

    def command(
        target: Annotated[str, typer.Argument(help="job/NAME or trainingjob/NAME.")],
        namespace: NamespaceOpt = "default",
        wait: WaitOpt = False,
        timeout: TimeoutOpt = 120.0,
        server: ServerOpt = None,
        token: TokenOpt = None,
    ) -> None:
        _run(target, namespace, value, wait, timeout, server, token)

    command.__doc__ = doc
    return command


suspend = app.command("suspend")(
    _command(True, "Suspend a job: its pods stop (SIGTERM, then the grace period) and it gives up its quota.")
)
resume = app.command("resume")(
    _command(False, "Resume a suspended job: it queues again and restarts from its checkpoints.")
)


def set_suspend(client: Client, name: str, namespace: str, value: bool) -> tuple[dict[str, Any], bool]:
    """Set ``spec.runPolicy.suspend`` of TrainingJob ``name``; ``(the job, whether it changed)``.
    A finished job is refused (:class:`BadInput`): nothing of it runs, so the flag would change
    nothing and a wait for the new state would never end."""
    for _ in range(_RETRIES):
        job = client.get("TrainingJob", name, namespace)
        _refuse_finished(job, "suspended" if value else "resumed")
        policy = job["spec"].setdefault("runPolicy", {})
        if bool(policy.get("suspend")) == value:
            return job, False
        policy["suspend"] = value
        job.pop("status", None)
        try:
            return client.update(job), True  # carries the resourceVersion read: a stale write conflicts
        except ObjectConflict:
            continue
    raise ObjectConflict(409, "Conflict", f"trainingjob/{name} kept changing; try again")


def _run(
    target: str,
    namespace: str,
    value: bool,
    wait: bool,
    timeout: float,
    server: str | None,
    token: str | None,
) -> None:
    verb = "suspended" if value else "resumed"
    with handle_errors():
        _, name = resolve_target(target, ("TrainingJob",))
        with connect(server, token) as client:
            before = _state(client.get("TrainingJob", name, namespace))
            _, changed = set_suspend(client, name, namespace, value)
            ref = f"trainingjob/{name}"
            if not changed:
                console.print(f"{ref} already {verb} (state: {before})", markup=False)
                return
            console.print(
                f"{ref} {verb} (spec.runPolicy.suspend: {str(value).lower()}; was {before})", markup=False
            )
            if wait:
                state = _wait(client, name, namespace, value, timeout)
                console.print(f"{ref} is {state}", markup=False)


def _wait(client: Client, name: str, namespace: str, suspended: bool, timeout: float) -> str:
    """Poll until the job's state agrees with ``suspended``; its state then."""
    deadline = time.monotonic() + timeout
    while True:
        state = _state(client.get("TrainingJob", name, namespace))
        if (state == "Suspended") == suspended:
            return state
        if time.monotonic() >= deadline:
            fail(f"trainingjob/{name} is still {state} after {timeout:.0f}s; is `muster up` running?")
        time.sleep(_WAIT_POLL_S)


def _state(job: dict[str, Any]) -> str:
    phase = job_phase(job)
    return phase.value if phase else "Created"


def _refuse_finished(job: dict[str, Any], verb: str) -> None:
    phase = job_phase(job)
    if phase in (JobPhase.SUCCEEDED, JobPhase.FAILED):
        name = job["metadata"]["name"]
        raise BadInput(
            [
                f"error: trainingjob/{name} has {phase.value}; a finished job cannot be {verb} "
                f"(delete it and apply it again to run it anew)"
            ]
        )

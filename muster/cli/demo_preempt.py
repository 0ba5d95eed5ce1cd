"""The demo's second act: a preemption with the checkpoint handshake, followed live.

Two teams share the fake GPUs (``examples/queues.yaml``). Team A's low-priority two-replica
job borrows team B's GPU; team B's urgent job takes it back: the low job's replicas get
SIGTERM, save a checkpoint and exit, the job waits in its queue, then resumes from the
checkpoint and finishes. A rich live table follows both jobs, with their GPUs and the
trainer's step; a summary closes it (waits, run times, GPU-seconds, preemptions,
restarts). With torch installed the replicas run the real DDP trainer
(``examples/ddp_train.py``, gloo); without it, ``examples/quickstart/trainer.py``, a stand-in
with the same checkpoint protocol.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from rich.live import Live
from rich.table import Table

from muster.api.labels import JOB_NAME_LABEL
from muster.api.lifecycle import JobPhase, job_phase
from muster.cli.app import console
from muster.store.events import refers_to

__all__ = ["preemption_act"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
_TIMEOUT = 150.0
_STEPS, _EVERY, _STEP_TIME = 60, 10, 0.1
_PREEMPT_AT = 15  # the urgent job arrives once the low job has trained this many steps


@dataclass
class _Track:
    """What the live view has seen of one job."""

    name: str
    created: float
    state: str = "Created"
    first_running: float | None = None
    ended: float | None = None
    run_seconds: float = 0.0
    gpu_seconds: float = 0.0
    gpus: list[str] = field(default_factory=list)
    step: str = ""
    announced: str = ""  # the state last printed
    preempted_by: str = ""
    preemptions: int = 0  # recorded in the job's status
    preemptions_told: int = 0  # printed (the Preempted phase may pass between two looks)
    seen: set[str] = field(default_factory=set)  # trainer lines already printed


def preemption_act(client: Any, home: Path) -> None:
    """Run the act against the demo's server (``client``) whose MUSTER_HOME is ``home``."""
    torch = _has_torch()
    script = EXAMPLES / "ddp_train.py" if torch else EXAMPLES / "quickstart" / "trainer.py"
    console.print(
        "\n[bold]# Act 2: a preemption with the checkpoint handshake.[/] Two teams share the GPUs "
        "(examples/queues.yaml): team A's low-priority two-replica job borrows team B's GPU, "
        "then team B's urgent job takes it back."
    )
    if not torch:
        console.print(
            "# torch is not installed here, so the replicas run examples/quickstart/trainer.py, "
            "a stand-in with the same checkpoint protocol (pip install -e '.[torch]' for real DDP).",
            markup=False,
        )
    client.apply(_docs("queues.yaml"))
    low = _docs("trainingjob.yaml")[0]
    for replica in low["spec"]["replicaSpecs"].values():
        container = replica["template"]["spec"]["containers"][0]
        container["command"] = [sys.executable, str(script)]
        container["args"] = [
            "--steps", str(_STEPS), "--checkpoint-every", str(_EVERY),
            "--step-time", str(_STEP_TIME), "--log-every", "5",
        ]  # fmt: skip
    urgent = _docs("urgent.yaml")[0]
    urgent_container = urgent["spec"]["replicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    urgent_container["command"] = [sys.executable, "-c", "import time; print('urgent work'); time.sleep(3)"]
    started = time.monotonic()
    tracks = {"ddp": _Track("ddp", started)}
    client.apply([low])
    log = home / "logs" / "default" / "ddp-master-0" / "trainer.log"
    with Live(_table(tracks), console=console.rich(), refresh_per_second=8, transient=False) as live:
        last = time.monotonic()
        while True:
            now = time.monotonic()
            if now - started > _TIMEOUT:
                raise RuntimeError(f"the demo's jobs did not finish within {_TIMEOUT:.0f}s")
            for track in tracks.values():
                _observe(client, track, now, now - last, log if track.name == "ddp" else None)
            last = now
            if "urgent" not in tracks and _step_of(tracks["ddp"].step) >= _PREEMPT_AT:
                live.console.print(f"# ddp reached step {_PREEMPT_AT}: submitting team B's urgent job")
                tracks["urgent"] = _Track("urgent", now)
                client.apply([urgent])
            for line in _news(tracks, log):
                live.console.print(line, markup=False)
            live.update(_table(tracks))
            if all(t.state in ("Succeeded", "Failed") for t in tracks.values()) and len(tracks) == 2:
                break
            time.sleep(0.25)
    _summary(client, tracks)


def _has_torch() -> bool:
    return importlib.util.find_spec("torch") is not None


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def _observe(client: Any, track: _Track, now: float, dt: float, log: Path | None) -> None:
    job = client.get("TrainingJob", track.name, "default")
    track.state = _state(job)
    preemptions = (job.get("status") or {}).get("preemptions") or []
    if preemptions:
        last = preemptions[-1]
        track.preempted_by = f" by {last.get('preemptor', '?')} ({last.get('reason', '?')})"
    track.preemptions = len(preemptions)
    pods = client.list("Pod", "default", selector=f"{JOB_NAME_LABEL}={track.name}").get("items", [])
    running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
    track.gpus = [
        f"{p['metadata']['name']}→GPU {','.join(map(str, p['spec'].get('gpus') or []))}" for p in running
    ]
    if running:
        track.first_running = track.first_running or now
        track.run_seconds += dt
        track.gpu_seconds += dt * sum(len(p["spec"].get("gpus") or []) for p in running)
    if track.state in ("Succeeded", "Failed") and track.ended is None:
        track.ended = now
    if log is not None and log.exists():
        steps = [line for line in log.read_text().splitlines() if line.startswith("step ")]
        track.step = steps[-1].split()[1] if steps else track.step


def _devices(pod: dict[str, Any]) -> str:
    return ",".join(str(g) for g in pod["spec"].get("gpus") or [])


def _state(job: dict[str, Any]) -> str:
    phase = job_phase(job)
    return phase.value if phase is not None else JobPhase.CREATED.value


def _step_of(step: str) -> int:
    return int(step.split("/")[0]) if step else 0


def _news(tracks: dict[str, _Track], log: Path) -> list[str]:
    """Lines for what happened since the last look: state changes and the trainer's
    checkpoint and resume lines (from every run's log: a restart rotates it to ``.1``)."""
    out: list[str] = []
    for t in tracks.values():
        if t.preemptions > t.preemptions_told:  # from the status: told even if the phase passed
            t.preemptions_told = t.preemptions
            out.append(f"  job/{t.name}: Preempted{t.preempted_by}")
        if t.state != t.announced and not (t.state == "Running" and not t.gpus):
            t.announced = t.state
            if t.state != "Preempted":
                where = f" on {', '.join(t.gpus)}" if t.state == "Running" else ""
                out.append(f"  job/{t.name}: {t.state}{where}")
    ddp = tracks["ddp"]
    for path in sorted(log.parent.glob("trainer.log*")) if log.parent.exists() else []:
        for line in path.read_text().splitlines():
            marked = "SIGTERM: saved a checkpoint" in line or line.startswith("resumed from step")
            if marked and line not in ddp.seen:
                ddp.seen.add(line)
                out.append(f"  job/ddp master: {line}")
    return out


def _table(tracks: dict[str, _Track]) -> Table:
    table = Table(title="live: muster get trainingjobs + the master's log", title_justify="left")
    for col in ("JOB", "STATE", "PODS ON GPUS", "STEP"):
        table.add_column(col)
    for t in tracks.values():
        table.add_row(t.name, t.state, ", ".join(t.gpus) or "-", t.step or "-")
    return table


def _restart_reasons(client: Any, name: str) -> list[str]:
    """Why a job's gang was restarted, from its events (a restart is a replica's failure; the
    live view may not sample the short Restarting phase)."""
    job = client.get("TrainingJob", name, "default")
    events = [e for e in client.list("Event", "default")["items"] if refers_to(e, job)]
    return [
        f"# job/{name} was restarted: {e.get('message', '')}"
        for e in sorted(events, key=lambda e: e.get("lastTimestamp") or "")
        if e.get("reason") == "Restarting"
    ]


def _summary(client: Any, tracks: dict[str, _Track]) -> None:
    table = Table(title="summary", title_justify="left")
    for col in ("JOB", "RESULT", "WAITED", "RAN", "GPU-SECONDS", "PREEMPTIONS", "RESTARTS"):
        table.add_column(col, justify="right" if col not in ("JOB", "RESULT") else "left")
    for t in tracks.values():
        status = client.get("TrainingJob", t.name, "default").get("status") or {}
        waited = (t.first_running or t.created) - t.created
        table.add_row(
            t.name,
            t.state,
            f"{waited:.1f}s",
            f"{t.run_seconds:.1f}s",
            f"{t.gpu_seconds:.1f}",
            str(len(status.get("preemptions") or [])),
            str(status.get("restartCount", 0)),
        )
    console.print()
    console.print(table)
    for t in tracks.values():
        for line in _restart_reasons(client, t.name):
            console.print(line, markup=False)
    console.print(
        "# Times are sampled by this view every 0.25 s. A preemption is not a restart: it does not "
        "count against backoffLimit, and the job resumed from its checkpoint.\n"
        "# Next: the tutorial (docs/tutorial.md) runs this on your own server: `muster up "
        "--fake-gpus 2`, `muster apply -f examples/queues.yaml`, `muster apply -f "
        "examples/trainingjob.yaml`, then `muster why job/ddp`, `muster top gpus` and the "
        "dashboard at the URL `muster up` prints."
    )

"""A throwaway one-node Slurm cluster for the side-by-side benchmarks: munged, slurmctld and
slurmd from Debian's ``slurm-wlm`` and ``munge`` packages, on this host, in a temp directory.

The node declares 8 GPUs as a generic resource with no device files (``gres.conf`` has a Count
and no File) and as many CPUs as GPUs (``SlurmdParameters=config_overrides``: the configured
node, not the probed hardware), so a one-GPU job takes one of 8 slots, as on ``muster up
--fake-gpus 8``. The resource is named :data:`GRES` (``fakegpu``), not ``gpu``: Slurm's gpu
plugin drops a GPU without a device file ("Removing file-less GPU" in slurmd's log, and the
node goes INVAL), while a plain counted resource is scheduled the same way; jobs ask for it
with ``--gres=fakegpu:N``. munged gets a fresh key and a socket of its own; nothing outside the temp
directory is touched, and :meth:`LocalSlurm.stop` stops the three daemons by their pids.

    with LocalSlurm(gpus=8) as slurm:
        slurm.run(["sbatch", "--wrap", "true"])
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from cpu_meter import CpuMeter

__all__ = ["GRES", "LocalSlurm", "SlurmUnavailable", "missing_programs"]

GRES = "fakegpu"

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel")


class SlurmUnavailable(RuntimeError):
    """Slurm or munge is not installed here, or the daemons did not come up."""


def missing_programs() -> list[str]:
    return [p for p in PROGRAMS if shutil.which(p) is None and not Path(f"/usr/sbin/{p}").exists()]


class LocalSlurm:
    def __init__(self, gpus: int = 8) -> None:
        self.gpus = gpus
        self.dir = Path(tempfile.mkdtemp(prefix="muster-slurm-"))
        self.node = socket.gethostname().split(".")[0]
        self.env = {**os.environ, "SLURM_CONF": str(self.dir / "slurm.conf")}
        self._procs: list[subprocess.Popen[bytes]] = []
        self.meter = CpuMeter("slurm")  # the daemons, with every step and job they start

    def __enter__(self) -> LocalSlurm:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> LocalSlurm:
        missing = missing_programs()
        if missing:
            raise SlurmUnavailable(
                f"{', '.join(missing)} not found: install Debian's slurm-wlm and munge "
                "(apt-get install slurm-wlm munge) to run Slurm side by side"
            )
        try:
            self._write_config()
            self._start_munge()
            self._daemon(["slurmctld", "-D", "-i", "-f", str(self.dir / "slurm.conf")], "slurmctld")
            self._daemon(["slurmd", "-D", "-f", str(self.dir / "slurm.conf"), "-N", self.node], "slurmd")
            self._wait_idle()
            for proc in self._procs:
                self.meter.add(proc.pid)
            self.meter.add(int((self.dir / "munged.pid").read_text().strip()))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.kill(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=5)
        self._procs.clear()
        pid_file = self.dir / "munged.pid"
        if pid_file.exists():
            try:
                os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
            except (ValueError, ProcessLookupError):
                pass
        self.meter.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, args: list[str], check: bool = True) -> str:
        """Run a Slurm client command against this cluster; its stdout."""
        done = subprocess.run(args, env=self.env, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def active_jobs(self) -> int:
        """Jobs pending, running or completing."""
        out = self.run(["squeue", "-h", "-t", "PENDING,RUNNING,COMPLETING,CONFIGURING", "-o", "%i"])
        return len(out.split())

    # -- set-up ---------------------------------------------------------------------------

    def _write_config(self) -> None:
        d = self.dir
        for sub in ("state", "spool", "log"):
            (d / sub).mkdir()
        ctl_port, node_port = _free_port(), _free_port()
        node_line = (
            f"NodeName={self.node} NodeAddr=127.0.0.1 CPUs={self.gpus} Boards=1 SocketsPerBoard=1 "
            f"CoresPerSocket={self.gpus} ThreadsPerCore=1 RealMemory=4096 Gres={GRES}:{self.gpus} "
            "State=UNKNOWN"
        )
        (d / "slurm.conf").write_text(
            f"""ClusterName=musterbench
SlurmctldHost={self.node}(127.0.0.1)
SlurmctldPort={ctl_port}
SlurmdPort={node_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={d}/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
LaunchParameters=use_interactive_step
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes={GRES}
SlurmdParameters=config_overrides
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MinJobAge=2
KillWait=2
MaxArraySize=100001
MaxJobCount=200000
{node_line}
PartitionName=bench Nodes={self.node} Default=YES MaxTime=INFINITE State=UP
"""
        )
        # A count and no File: GPUs as a plain countable resource, no device files.
        (d / "gres.conf").write_text(f"NodeName={self.node} Name={GRES} Count={self.gpus}\n")

    def _start_munge(self) -> None:
        d = self.dir
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        subprocess.run(
            [
                _program("munged"),
                "--force",
                f"--key-file={key}",
                f"--socket={d}/munge.socket",
                f"--pid-file={d}/munged.pid",
                f"--log-file={d}/log/munged.log",
                f"--seed-file={d}/munged.seed",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )  # it daemonises; stopped by its pid file

    def _daemon(self, args: list[str], name: str) -> None:
        log = open(self.dir / "log" / f"{name}.out", "ab")  # noqa: SIM115 (kept open by the child)
        self._procs.append(
            subprocess.Popen([_program(args[0]), *args[1:]], env=self.env, stdout=log, stderr=log)
        )

    def _wait_idle(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            for proc in self._procs:
                if proc.poll() is not None:
                    raise SlurmUnavailable(f"{proc.args[0]} exited ({proc.returncode}): see {self.dir}/log")
            done = subprocess.run(
                ["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True, timeout=30
            )
            last = (done.stdout + done.stderr).strip()
            if done.returncode == 0 and last.startswith("idle"):
                return
            time.sleep(0.5)
        raise SlurmUnavailable(f"the Slurm node did not become idle in {timeout:.0f}s (sinfo: {last!r})")


def _program(name: str) -> str:
    return shutil.which(name) or f"/usr/sbin/{name}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

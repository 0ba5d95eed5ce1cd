"""CPU seconds used by a set of daemons and everything they start, exited processes included.

The daemons are moved into a cgroup of their own (cgroup v1 ``cpuacct``, or v2 ``cpu.stat``);
their children (Muster's shims and jobs, Slurm's slurmstepd and jobs) are born into it, even
the ones a daemon double-forks away, and the cgroup's counter keeps the CPU of those that
ended. Where no cgroup can be made (no permission), it falls back to the daemons' own CPU plus
that of the children they reaped (``/proc/PID/stat``), and says so.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

__all__ = ["CpuMeter", "HostSteal"]

_V1 = Path("/sys/fs/cgroup/cpuacct")
_V2 = Path("/sys/fs/cgroup")


class HostSteal:
    """The share of this machine's CPU time its hypervisor gave to others (``/proc/stat``'s
    steal) since it was made: on a shared virtual machine, what a run lost, so that runs of
    one code that differ by a third can be told apart from a change that did. None where
    the kernel does not say."""

    def __init__(self) -> None:
        self._start = (_steal_seconds(), time.monotonic())

    def percent(self) -> float | None:
        steal, started = self._start
        now = _steal_seconds()
        wall = time.monotonic() - started
        if steal is None or now is None or wall <= 0:
            return None
        return 100 * (now - steal) / (wall * (os.cpu_count() or 1))


def _steal_seconds() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    def __init__(self, label: str) -> None:
        self.pids: list[int] = []
        self.group: Path | None = None
        self.v2 = False
        name = f"muster-bench-{label}-{uuid.uuid4().hex[:6]}"
        for root, v2 in ((_V1, False), (_V2, True)):
            if not (root / "cgroup.procs").exists() or (v2 and not (root / "cgroup.controllers").exists()):
                continue
            try:
                (root / name).mkdir()
            except OSError:
                continue
            self.group, self.v2 = root / name, v2
            break

    @property
    def how(self) -> str:
        return "cgroup" if self.group is not None else "reaped children only"

    def add(self, pid: int) -> None:
        """Count ``pid`` and what it starts from now on."""
        self.pids.append(pid)
        if self.group is not None:
            (self.group / "cgroup.procs").write_text(str(pid))

    def seconds(self) -> float:
        if self.group is not None:
            if self.v2:
                for line in (self.group / "cpu.stat").read_text().splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
                return 0.0
            return int((self.group / "cpuacct.usage").read_text()) / 1e9
        total = 0.0
        tick = os.sysconf("SC_CLK_TCK")
        for pid in self.pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except FileNotFoundError:
                continue
            total += sum(int(v) for v in fields[11:15]) / tick  # utime stime cutime cstime
        return total

    def close(self) -> None:
        """Remove the cgroup (once its processes are gone; left behind otherwise)."""
        if self.group is not None:
            try:
                self.group.rmdir()
            except OSError:
                pass

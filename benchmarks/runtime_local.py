"""Local runtime throughput: how fast pods start, are seen running, end, and how much a poll costs.

Usage: python benchmarks/runtime_local.py [N_PODS]   (default 20; prints one line per measure)
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from muster.runtime.base import Container, DeviceBinding, PodLaunch, PodPhase, PodRef
from muster.runtime.local.fake import parse_fake_gpus
from muster.runtime.local.runtime import LocalRuntime


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        gate = home / "gate"
        wait = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)"
        rt = LocalRuntime(home, fake_gpus=parse_fake_gpus("8"))
        pods = [
            PodLaunch(PodRef("bench", f"p{i}", f"u{i}"), (Container("main", (sys.executable, "-c", wait)),))
            for i in range(n)
        ]
        t0 = time.perf_counter()
        for i, pod in enumerate(pods):
            rt.start(pod, DeviceBinding((i % 8,)))
        t_start = time.perf_counter() - t0
        running: set[str] = set()
        while len(running) < n:
            running |= {c.ref.uid for c in rt.poll(1.0) if c.phase == PodPhase.RUNNING}
        t_running = time.perf_counter() - t0
        polls = 200
        t1 = time.perf_counter()
        for _ in range(polls):
            rt.poll(0)
        t_poll = (time.perf_counter() - t1) / polls
        gate.touch()
        t2 = time.perf_counter()
        done: set[str] = set()
        while len(done) < n:
            done |= {c.ref.uid for c in rt.poll(1.0) if c.final}
        t_final = time.perf_counter() - t2
        rt.close()
    print(f"pods: {n}")
    print(f"start() total: {t_start * 1000:.1f} ms ({t_start / n * 1000:.2f} ms per pod)")
    print(f"all Running after: {t_running * 1000:.0f} ms")
    print(f"poll() with {n} running pods: {t_poll * 1e6:.0f} us")
    print(f"all final after the gate opened: {t_final * 1000:.0f} ms")


if __name__ == "__main__":
    main()

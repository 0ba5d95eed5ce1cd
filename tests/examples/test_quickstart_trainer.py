"""examples/quickstart/trainer.py, the demo's torch-free stand-in: SIGTERM saves a checkpoint
and exits 143, a new run resumes from it and finishes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from muster.testing import wait_for

SCRIPT = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "trainer.py"


def _start(ckpt: Path, log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "RANK": "0", "MUSTER_CHECKPOINT_DIR": str(ckpt)}
    args = ["--steps", "40", "--checkpoint-every", "5", "--step-time", "0.05", "--log-every", "1"]
    with log.open("wb") as out:
        return subprocess.Popen([sys.executable, str(SCRIPT), *args], env=env, stdout=out)


def test_sigterm_checkpoints_and_a_new_run_resumes_there(tmp_path: Path) -> None:
    ckpt, first, second = tmp_path / "ckpt", tmp_path / "first.log", tmp_path / "second.log"
    proc = _start(ckpt, first)
    wait_for(lambda: "step 7/40" in first.read_text(), timeout=30, what="the trainer to reach step 7")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143
    text = first.read_text()
    saved = int(text.split("SIGTERM: saved a checkpoint at step ")[1].split(";")[0])
    assert saved >= 7 and (ckpt / f"ckpt-{saved:08d}.json").exists()
    proc = _start(ckpt, second)
    assert proc.wait(timeout=60) == 0
    resumed = second.read_text()
    assert resumed.startswith(f"resumed from step {saved}\n")
    assert f"step {saved + 1}/40" in resumed and "step 40/40" in resumed
    assert f"step {saved}/40" not in resumed  # nothing before the checkpoint ran again

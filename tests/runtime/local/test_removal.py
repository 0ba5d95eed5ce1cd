"""The Remover: released pods' files removed in batches by one `rm` run each, in order, with
their before/after steps; settle() waits for them, close() finishes them."""

from __future__ import annotations

import logging
import shlex
from pathlib import Path

import pytest

from muster.runtime.local.removal import Remover
from muster.testing import wait_for


def _tree(root: Path) -> Path:
    """A pod-like tree: files, a nested directory, a link to something outside it."""
    (root / "sub").mkdir(parents=True)
    (root / "a.json").write_text("{}")
    (root / "sub" / "b.log").write_text("log")
    return root


def _counting(log: Path) -> tuple[str, ...]:
    """An `rm -rf --` that first notes how many paths it was given."""
    return ("sh", "-c", f'echo "$#" >> {shlex.quote(str(log))}; exec rm -rf -- "$@"', "rm")


@pytest.fixture
def remover():
    made: list[Remover] = []

    def make(**kw: object) -> Remover:
        r = Remover(**kw)  # type: ignore[arg-type]
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def test_trees_go_and_links_in_them_are_not_followed(remover, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("kept")
    pod = _tree(tmp_path / "pod")
    (pod / "link").symlink_to(outside)
    r = remover(linger=60.0)
    r.remove([pod, tmp_path / "never-made"])
    r.settle()  # at once, though the removal would linger a minute
    assert not pod.exists() and (outside / "keep").read_text() == "kept"


def test_removals_asked_meanwhile_share_one_run_in_order_with_their_steps(remover, tmp_path):
    runs = tmp_path / "runs"
    steps: list[str] = []
    r = remover(command=_counting(runs), linger=60.0)
    pods = [_tree(tmp_path / f"pod{i}") for i in range(3)]
    for i, pod in enumerate(pods):
        r.remove(
            [pod, tmp_path / f"vol{i}"],
            before=lambda i=i, pod=pod: steps.append(f"before {i} {pod.exists()}"),
            after=lambda i=i, pod=pod: steps.append(f"after {i} {pod.exists()}"),
        )
    r.settle()
    assert runs.read_text().split() == ["6"]  # one `rm` for the three pods' six paths
    assert steps == [*(f"before {i} True" for i in range(3)), *(f"after {i} False" for i in range(3))]
    assert not any(p.exists() for p in pods)


def test_a_removal_goes_by_itself_after_the_linger(remover, tmp_path):
    pod = _tree(tmp_path / "pod")
    r = remover(linger=0.05)
    r.remove([pod])
    wait_for(lambda: not pod.exists(), timeout=10, what="the lingering removal to run")


def test_without_rm_the_thread_removes_the_files_itself(remover, tmp_path, caplog):
    r = remover(command=(str(tmp_path / "no-such-rm"), "-rf", "--"), linger=60.0)
    first, second = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    with caplog.at_level(logging.INFO, logger="muster.runtime.local.removal"):
        r.remove([first])
        r.settle()
        r.remove([second])
        r.settle()
    assert not first.exists() and not second.exists()
    assert sum("removing files in process from now on" in m for m in caplog.messages) == 1


def test_a_failing_step_is_logged_and_the_others_still_run(remover, tmp_path, caplog):
    pods = [_tree(tmp_path / "a"), _tree(tmp_path / "b")]
    after: list[str] = []

    def broken() -> None:
        raise OSError("cgroup busy")

    r = remover(linger=60.0)
    with caplog.at_level(logging.ERROR, logger="muster.runtime.local.removal"):
        r.remove([pods[0]], before=broken)
        r.remove([pods[1]], after=lambda: after.append("b"))
        r.settle()
    assert not any(p.exists() for p in pods) and after == ["b"]
    assert "a clean-up step failed" in caplog.text


def test_a_run_that_fails_is_logged_and_the_batch_still_finishes(remover, tmp_path, caplog):
    # As rmtree's ignore_errors: what rm could not remove (say, a directory the pod made
    # read-only) stays, is reported, and is not retried; the removals' own steps still run.
    failing = ("sh", "-c", 'echo "cannot remove $1: Permission denied" >&2; exit 1', "rm")
    after: list[str] = []
    r = remover(command=failing, linger=60.0)
    pod = _tree(tmp_path / "pod")
    with caplog.at_level(logging.WARNING, logger="muster.runtime.local.removal"):
        r.remove([pod], after=lambda: after.append("done"))
        r.settle()
    assert pod.exists() and after == ["done"]
    assert f"sh left some of 1 paths: cannot remove {pod}: Permission denied" in caplog.text


def test_close_finishes_what_was_asked_and_refuses_more(tmp_path):
    pod = _tree(tmp_path / "pod")
    r = Remover(linger=60.0)
    r.remove([pod])
    r.close()
    assert not pod.exists()
    with pytest.raises(RuntimeError, match="closed"):
        r.remove([tmp_path / "late"])
    r.close()  # twice: nothing more

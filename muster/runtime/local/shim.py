"""The container shim: ``python -m muster.runtime.local.shim POD_DIR CONTAINER [--notify-fd N]
[--owner PID:START]``.

One shim runs per container. The runtime starts it in a new session, so it outlives the
server (a crash, a SIGKILL, a Ctrl-C of ``muster up``). With ``--owner`` (the Ray runtime's
pod actor, identified by pid and start time) it is the other way round: the shim detaches
(it forks; the child, in a session of its own, is nobody's child, so a Ray worker that kills
its children on exit does not kill it), and once the owner is gone SIGKILLs the process group
and records the end, since nobody is left to watch or stop it. The shim then:

0. takes ``<container>.lock`` (held while it lives; a second shim of the container exits at
   once) and records its pid and start time in ``<container>.launch.json``;
1. reads ``<container>.spec.json`` (argv, env, cwd, log file, memory limit, grace);
2. starts the command in its own process group (pgid = its pid), stdout and stderr appended
   to the log file, inside a memory cgroup when the spec names one (``os.posix_spawn``, or
   ``subprocess`` where the process must join a cgroup before its exec);
3. writes ``<container>.state.json``: its own pid and start time, the process's pid, pgid
   and start time (start times let a later runtime tell a live process from a reused pid);
4. relays SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to the process group. A
   SIGTERM or SIGINT is a stop: after the grace (``stop.json``'s, else the spec's) the shim
   SIGKILLs the group. A stop that arrives before the process starts keeps it from starting;
5. watches the memory limit (RSS of the process tree, or the cgroup's OOM counter);
6. when the process exits, SIGKILLs what is left of its group (a container ends with its
   main process) and writes ``<container>.status.json`` atomically: exit code (128+N for
   signal N), signal, whether it was OOM-killed, whether a stop reached it first.

The shim imports only the standard library and the two stdlib-only runtime modules, and
:func:`command` starts it with ``python -S -E`` (no site-packages scan, no .pth files), so a
container's start costs a bare interpreter and a handful of modules, not a full Python start-up
(docs/runtime-local.md, "The shim").
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the shim imports this module: no typing at run time
    from typing import Any, BinaryIO

from muster.runtime.local import procfs
from muster.runtime.local.files import ContainerFiles, claim, read_json, write_json
from muster.runtime.local.memory import Limiter, open_limiter

__all__ = ["PACKAGE_ROOT", "RELAYED_SIGNALS", "STOP_SIGNALS", "command", "main"]

RELAYED_SIGNALS = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
OOM_EXIT_CODE = 137
_OWNER_CHECK = 0.5  # seconds between looks at the owner (--owner)
_USAGE = """usage: python -m muster.runtime.local.shim [-h] [--notify-fd N] [--owner PID:START]
                                           pod_dir container

  pod_dir              the pod's state directory
  container            the container's name
  --notify-fd N        pipe to the runtime, written once started
  --owner PID:START    detach, and end the container once that process is gone"""
# The directory that holds the ``muster`` package (the repository for an editable install,
# site-packages for a wheel), which :func:`command` puts on the shim's path by hand.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv.pop(1)); "
    "from muster.runtime.local.shim import main; raise SystemExit(main())"
)


def main(argv: list[str] | None = None) -> int:
    """Run one container (see the module docstring for the arguments)."""
    pod_dir, container, notify_fd, owner_text = _parse(sys.argv[1:] if argv is None else argv)
    if notify_fd is not None:
        # Passed in inheritable (by the zygote's message, or Popen's pass_fds): the container
        # must not hold the runtime's pipe open.
        with contextlib.suppress(OSError):
            os.set_inheritable(notify_fd, False)
    files = ContainerFiles(Path(pod_dir), container)
    owner = None
    if owner_text:
        pid, _, start = owner_text.partition(":")
        owner = (int(pid), float(start))
        _detach()
    lock = claim(files)
    if lock is None:
        print(f"shim: another shim already runs container {container!r}; this one exits", file=sys.stderr)
        return 0
    # Recorded by the shim itself, under the lock: whoever started it may be gone already.
    write_json(files.launch, {"shim_pid": os.getpid(), "shim_create_time": _create_time(os.getpid())})
    return _Shim(files, notify_fd, owner).run()


def command(pod_dir: Path | str, container: str, *options: str) -> list[str]:
    """The argv that starts a shim: this interpreter without ``site`` (no .pth files, no
    site-packages scan) and without ``PYTHON*`` variables, with only Muster's own directory on
    the path: the shim needs nothing else, and a container's start is dominated by what the
    interpreter loads before it. ``options`` are ``--notify-fd N`` or ``--owner PID:START``."""
    if not procfs.available():  # the shim then needs psutil, from site-packages
        return [sys.executable, "-m", "muster.runtime.local.shim", str(pod_dir), container, *options]
    return [sys.executable, "-S", "-E", "-c", _BOOT, PACKAGE_ROOT, str(pod_dir), container, *options]


def _parse(argv: list[str]) -> tuple[str, str, int | None, str | None]:
    # Not argparse: it imports re, gettext and more, a cost paid by every container start.
    usage = "\n".join(_USAGE.split("\n", 2)[:2])
    if "-h" in argv or "--help" in argv:
        print(_USAGE)
        raise SystemExit(0)
    positional: list[str] = []
    options: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        if arg in ("--notify-fd", "--owner"):
            value = next(it, None)
            if value is None:
                raise SystemExit(f"{usage}\nshim: {arg} needs a value")
            options[arg] = value
        elif arg.startswith("-"):
            raise SystemExit(f"{usage}\nshim: unknown option {arg}")
        else:
            positional.append(arg)
    if len(positional) != 2:
        raise SystemExit(usage)
    fd = options.get("--notify-fd")
    try:
        notify_fd = int(fd) if fd is not None else None
    except ValueError:
        raise SystemExit(f"{usage}\nshim: --notify-fd takes a number, got {fd!r}") from None
    return positional[0], positional[1], notify_fd, options.get("--owner")


class _Shim:
    def __init__(
        self, files: ContainerFiles, notify_fd: int | None, owner: tuple[int, float] | None = None
    ) -> None:
        self.files = files
        self.notify_fd = notify_fd
        self.owner = owner
        spec = read_json(files.spec)
        if spec is None:
            raise SystemExit(f"shim: no spec at {files.spec}")
        self.spec: dict[str, Any] = spec
        self.child: _Process | None = None
        self.stop_signalled_at: float | None = None  # wall clock, for the record
        self.kill_deadline: float | None = None  # monotonic
        self.killed_after_grace = False
        self.oom = False
        self.early_signals: list[int] = []

    # -- lifecycle ------------------------------------------------------------------------

    def run(self) -> int:
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        # Signals interrupt the wait below through this pipe, so a new kill deadline is seen at once.
        signal.set_wakeup_fd(wake_w)
        for sig in RELAYED_SIGNALS:
            signal.signal(sig, self._on_signal)

        if self.stop_signalled_at is not None or self.files.stop.exists():
            self._finish(None, message="stopped before the process started")
            return 0
        if self._owner_gone():
            self._finish(None, message="its owner was gone before the process started")
            return 0
        limiter = open_limiter(self.spec.get("memory"), self._cgroup_name()).prepare()
        if limiter.note:
            print(f"shim: {limiter.note}", file=sys.stderr, flush=True)
        if not self._spawn(limiter):
            return 0
        assert self.child is not None
        for sig in self.early_signals:  # a stop that raced with the spawn
            self._relay(sig)
        self._record_state(limiter)
        self._wait(limiter, wake_r)
        return 0

    def _spawn(self, limiter: Limiter) -> bool:
        spec = self.spec
        log = open(spec["log"], "ab", buffering=0)  # noqa: SIM115 - the child writes it; closed below
        try:
            # The pod's own working directory is made here, off the control plane's thread (a
            # workingDir of the spec was made, or refused, by the runtime already).
            os.makedirs(spec["cwd"], exist_ok=True)
        except OSError as exc:
            self._not_started(
                log, limiter, 126, f"cannot make working directory {spec['cwd']!r}: {exc.strerror or exc}"
            )
            return False
        try:
            if limiter.cgroup is not None:
                popen = _popen_in_cgroup(spec, log, limiter)
                self.child = _Process(popen.pid, popen)
            else:
                self.child = _Process(_posix_spawn(spec, log.fileno()))
        except OSError as exc:
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            what = f"cannot run {spec['argv'][0]!r}: {exc.strerror or exc}"
            if isinstance(exc, FileNotFoundError) and not os.path.isdir(spec["cwd"]):
                what = f"working directory {spec['cwd']!r} does not exist"
            self._not_started(log, limiter, code, what)
            return False
        log.close()
        return True

    def _not_started(self, log: BinaryIO, limiter: Limiter, code: int, what: str) -> None:
        """The process could not be started: say why in its log and its status."""
        log.write(f"muster: {what}\n".encode())
        log.close()
        limiter.finish()
        self._finish(code, message=what)

    def _record_state(self, limiter: Limiter) -> None:
        assert self.child is not None
        pid = self.child.pid
        state = {
            "shim_pid": os.getpid(),
            "shim_create_time": _create_time(os.getpid()),
            "pid": pid,
            "pgid": pid,
            "create_time": _create_time(pid),
            "started_at": time.time(),
            "memory_enforcement": limiter.mode,
            "memory_note": limiter.note,
            "cgroup": str(limiter.cgroup) if limiter.cgroup is not None else None,
        }
        write_json(self.files.state, state)
        if self.notify_fd is not None:
            with contextlib.suppress(OSError):  # the runtime may be gone: that is fine
                os.write(self.notify_fd, b"S")

    def _wait(self, limiter: Limiter, wake_r: int) -> None:
        assert self.child is not None
        child = self.child
        sel = selectors.DefaultSelector()
        sel.register(wake_r, selectors.EVENT_READ)
        try:
            pidfd: int | None = os.pidfd_open(child.pid)
            sel.register(pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            pidfd = None  # no pidfd (old kernel): fall back to waking up regularly
        next_check = next_owner_check = time.monotonic()
        while child.poll() is None:
            now = time.monotonic()
            if self.kill_deadline is not None and now >= self.kill_deadline:
                self.killed_after_grace = True
                self.kill_deadline = None
                _killpg(child.pid, signal.SIGKILL)
            if limiter.interval is not None and now >= next_check:
                next_check = now + limiter.interval
                if not self.oom and limiter.breached(child.pid):
                    self.oom = True
                    _killpg(child.pid, signal.SIGKILL)
            if self.owner is not None and now >= next_owner_check:
                next_owner_check = now + _OWNER_CHECK
                if self._owner_gone():
                    _killpg(child.pid, signal.SIGKILL)  # nobody is left to stop it gracefully
            waits = [0.1] if pidfd is None else []
            if self.owner is not None:
                waits.append(max(0.0, next_owner_check - now))
            if self.kill_deadline is not None:
                waits.append(self.kill_deadline - now)
            if limiter.interval is not None and not self.oom:
                waits.append(next_check - now)
            sel.select(max(0.0, min(waits)) if waits else None)
            with contextlib.suppress(BlockingIOError):
                while os.read(wake_r, 512):
                    pass
        # A container ends with its main process: whatever it left in its group goes too.
        _killpg(child.pid, signal.SIGKILL)
        if limiter.finish():
            self.oom = True
        code = child.returncode
        self._finish(code if code >= 0 else 128 - code, signal_no=-code if code < 0 else None)

    def _finish(self, exit_code: int | None, signal_no: int | None = None, message: str = "") -> None:
        if self.oom:
            exit_code, message = OOM_EXIT_CODE, message or "memory limit exceeded"
        status = {
            "exit_code": exit_code,
            "signal": signal_no,
            "oom_killed": self.oom,
            "started": self.child is not None,
            "stop_signalled_at": self.stop_signalled_at,
            "killed_after_grace": self.killed_after_grace,
            "finished_at": time.time(),
            "message": message,
        }
        write_json(self.files.status, status)

    # -- signals ----------------------------------------------------------------------------

    def _on_signal(self, signum: int, _frame: object) -> None:
        if signum in STOP_SIGNALS:
            now = time.monotonic()
            if self.stop_signalled_at is None:
                self.stop_signalled_at = time.time()
            deadline = now + self._grace()
            if self.kill_deadline is None or deadline < self.kill_deadline:
                self.kill_deadline = deadline
        if self.child is None:
            self.early_signals.append(signum)
        else:
            self._relay(signum)

    def _relay(self, signum: int) -> None:
        assert self.child is not None
        if self.child.returncode is None:
            _killpg(self.child.pid, signum)

    def _grace(self) -> float:
        try:
            stop = read_json(self.files.stop) or {}
        except ValueError:
            stop = {}
        grace = stop.get("grace_seconds")
        return float(grace if grace is not None else self.spec.get("grace_seconds", 30))

    # -- helpers ----------------------------------------------------------------------------

    def _owner_gone(self) -> bool:
        if self.owner is None:
            return False
        pid, start = self.owner
        return _start_time(pid) != start

    def _cgroup_name(self) -> str:
        return str(self.spec.get("cgroup_name") or f"{os.getpid()}-{self.files.container}")


class _Process:
    """The container's process: the little of a Popen the shim uses, on a pid of its own."""

    def __init__(self, pid: int, popen: object = None) -> None:
        self.pid = pid
        self.returncode: int | None = None  # as Popen's: -N for signal N
        # A Popen that started it, kept: one collected unfinished would be reaped by subprocess.
        self._popen = popen

    def poll(self) -> int | None:
        if self.returncode is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, os.WNOHANG)
                if pid == self.pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode


def _posix_spawn(spec: dict[str, Any], log_fd: int) -> int:
    """Start the container as ``subprocess.Popen`` would (its argv looked up on its own PATH,
    in its working directory, stdin from /dev/null, stdout and stderr to the log, a process
    group of its own, no other descriptor, default signal dispositions) with one
    ``posix_spawn``: no ``subprocess`` (it imports ``threading``, whose at-fork handler cost
    every shim a few hundred microseconds) and no Python code between fork and exec."""
    argv = spec["argv"]
    env = spec["env"]
    here = os.getcwd()
    os.chdir(spec["cwd"])  # posix_spawn has no working directory of its own: the shim's is passed on
    try:
        actions = [
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, log_fd, 1),
            (os.POSIX_SPAWN_DUP2, log_fd, 2),
        ]
        # Python ignores SIGPIPE and SIGXFSZ; an exec keeps what is ignored (Popen's restore_signals).
        defaults = (signal.SIGPIPE, signal.SIGXFSZ)
        first_error: OSError | None = None
        last = FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), argv[0])
        for path in _candidates(argv[0], env):
            if not os.path.exists(path):
                continue  # a look is cheaper than a spawn that fails (one per PATH entry before it)
            try:
                return os.posix_spawn(path, argv, env, file_actions=actions, setpgroup=0, setsigdef=defaults)
            except OSError as exc:
                # execvpe's rule, as Popen follows it: a missing candidate is skipped, and the
                # first other failure is what is reported when none runs.
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR):
                    first_error = first_error or exc
                    continue
                last = exc
        raise first_error or last
    finally:
        os.chdir(here)


def _candidates(program: str, env: dict[str, str]) -> list[str]:
    """Where to look for ``program``: itself when it names a path, else each directory of the
    container's PATH (or the default path when it has none), as ``Popen`` looks with ``env``."""
    if os.path.dirname(program):
        return [program]
    return [os.path.join(directory, program) for directory in os.get_exec_path(env)]


def _popen_in_cgroup(spec: dict[str, Any], log: Any, limiter: Limiter) -> Any:
    """Start the container through ``subprocess`` where it must join its memory cgroup between
    fork and exec (``preexec_fn``), which ``posix_spawn`` cannot do; imported only then."""
    import subprocess

    return subprocess.Popen(
        spec["argv"],
        env=spec["env"],
        cwd=spec["cwd"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        process_group=0,
        close_fds=True,
        preexec_fn=limiter.join,
    )


def _killpg(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _detach() -> None:
    """Fork; the parent exits at once, the child leads a session of its own."""
    if os.fork():
        os._exit(0)
    os.setsid()


def _start_time(pid: int) -> float | None:
    """The process's start time as psutil gives it, None when it is gone (or a zombie)."""
    if procfs.available():
        return None if procfs.is_zombie(pid) else procfs.create_time(pid)
    import psutil

    try:
        proc = psutil.Process(pid)
        return None if proc.status() == psutil.STATUS_ZOMBIE else proc.create_time()
    except psutil.Error:
        return None


def _create_time(pid: int) -> float | None:
    if procfs.available():
        return procfs.create_time(pid)
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


if __name__ == "__main__":
    sys.exit(main())

"""``python -m muster.sdk.run FILE:QUALNAME [--param NAME=JSON]... [--artifact NAME]...
[--returns parameter|artifact|none]``: run one ``@task`` function in its pod.

The container command of every SDK task (:mod:`muster.sdk.dsl`). It loads the function from
its file (the file's directory goes first on ``sys.path``, so modules beside it import),
decodes each ``--param`` value from JSON, passes each ``--artifact`` as the ``Path``
``MUSTER_INPUTS_DIR/NAME``, calls the function and writes its return value to
``MUSTER_OUTPUTS_DIR``: as JSON in ``return.json``, or, for a ``Path``, the file or directory
itself as ``return`` (moved when it is already under ``MUSTER_OUTPUTS_DIR``, copied otherwise).
In a distributed task only rank 0 (``RANK``) writes the result. An exception exits 1 with its
traceback on stderr.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import sys
import traceback
from pathlib import Path
from typing import Any

from muster.sdk.dsl import RETURN, RETURN_FILE, SdkError, Task

__all__ = ["inputs_dir", "load", "main", "outputs_dir"]


def outputs_dir() -> Path:
    """Where a task writes its outputs (``MUSTER_OUTPUTS_DIR``; a temporary directory when a
    task function is called outside Muster)."""
    return Path(os.environ.get("MUSTER_OUTPUTS_DIR") or _scratch("outputs"))


def inputs_dir() -> Path:
    """Where a task finds its input artifacts (``MUSTER_INPUTS_DIR``)."""
    return Path(os.environ.get("MUSTER_INPUTS_DIR") or _scratch("inputs"))


def load(reference: str) -> Task:
    """The ``@task`` at ``FILE:QUALNAME``."""
    file, _, qualname = reference.rpartition(":")
    path = Path(file)
    if not path.is_file():
        raise SdkError(f"{reference}: no file {file}")
    sys.path.insert(0, str(path.parent))
    spec = importlib.util.spec_from_file_location(f"muster_task_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SdkError(f"{reference}: cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not isinstance(obj, Task):
        raise SdkError(f"{reference}: {qualname} is not a @task function")
    return obj


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m muster.sdk.run", description=__doc__.splitlines()[0])
    parser.add_argument("reference", help="FILE:QUALNAME of the @task function")
    parser.add_argument("--param", action="append", default=[], help="NAME=JSON value")
    parser.add_argument("--artifact", action="append", default=[], help="NAME of an input artifact")
    parser.add_argument("--returns", choices=("parameter", "artifact", "none"), default="parameter")
    args = parser.parse_args(argv)
    try:
        fn = load(args.reference)
        kwargs: dict[str, Any] = {}
        for item in args.param:
            name, _, text = item.partition("=")
            try:
                kwargs[name] = json.loads(text)
            except ValueError:
                raise SdkError(f"--param {name}: {text!r} is not JSON") from None
        for name in args.artifact:
            kwargs[name] = inputs_dir() / name
        value = fn.fn(**kwargs)
        if int(os.environ.get("RANK", "0")) == 0:
            _write(value, args.returns)
    except Exception:
        traceback.print_exc()
        return 1
    return 0


def _write(value: Any, returns: str) -> None:
    out = outputs_dir()
    out.mkdir(parents=True, exist_ok=True)
    if returns == "none":
        return
    if returns == "parameter":
        (out / RETURN_FILE).write_text(json.dumps(value, sort_keys=True) + "\n")
        return
    if not isinstance(value, Path) or not value.exists():
        raise SdkError(f"the task is annotated to return a Path but returned {value!r}")
    dest = out / RETURN
    if value.resolve() == dest.resolve():
        return
    if out.resolve() in value.resolve().parents:
        value.rename(dest)
    elif value.is_dir():
        shutil.copytree(value, dest, symlinks=True)
    else:
        shutil.copy2(value, dest)


def _scratch(kind: str) -> str:
    import tempfile

    path = Path(tempfile.gettempdir()) / f"muster-sdk-{os.getpid()}" / kind
    path.mkdir(parents=True, exist_ok=True)
    return str(path)


if __name__ == "__main__":
    sys.exit(main())

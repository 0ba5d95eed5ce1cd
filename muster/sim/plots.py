"""Matplotlib for reports: the non-interactive Agg backend, imported only when plotting."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

__all__ = ["pyplot", "save"]


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the Agg backend (files only, no display needed).

    Raises ImportError with the install hint when the ``sim`` extra is missing.
    """
    try:
        import matplotlib
    except ImportError as exc:  # the sim extra is optional
        raise ImportError("plots need matplotlib: pip install 'muster[sim]'") from exc
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: Path, *axes: Any) -> None:
    """Grid the ``axes``, lay the figure out, write it as a PNG and free it."""
    for ax in axes:
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)

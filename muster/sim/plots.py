"""Matplotlib for reports: the non-interactive Agg backend, imported only when plotting."""

from __future__ import annotations

from types import ModuleType

__all__ = ["pyplot"]


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

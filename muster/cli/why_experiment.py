"""``muster why experiment/NAME`` as text: the server's explanation
(:mod:`muster.controllers.insight.explain.experiment`, fetched as JSON) rendered for people."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.text import Text

from muster.cli.app import console
from muster.cli.output import print_events, print_rows

__all__ = ["render_experiment"]

_STYLES = {"Running": "green", "Succeeded": "green", "Failed": "red"}


def render_experiment(ex: dict[str, Any], now: datetime | None = None) -> None:
    now = now or datetime.now(UTC)
    console.print(Text(ex["summary"], style=f"bold {_STYLES.get(ex['state'], 'yellow')}"))
    console.print()
    _field("State", ex["state"])
    if ex.get("reason"):
        _field("Reason", ex["reason"])
    if ex.get("message"):
        _field("Message", ex["message"])
    if ex.get("best"):
        best = ex["best"]
        params = ", ".join(f"{k}={v}" for k, v in best["parameters"].items())
        _field("Best", f"{best['trial']}: {best['metric']}={best['value']:.6g} ({params})")
    _field("GPU-time", f"{ex.get('gpuSeconds', 0):.1f} GPU-seconds held by its trials so far")
    if ex.get("running"):
        _heading("Running")
        print_rows(
            ["TRIAL", "REPORTS", "LATEST", "WHERE", "PARAMETERS"],
            [
                [
                    r["trial"],
                    str(r["reports"]),
                    "" if r.get("latest") is None else f"{r['latest']:.6g}",
                    r["where"],
                    ", ".join(f"{k}={v}" for k, v in r["parameters"].items()),
                ]
                for r in ex["running"]
            ],
            indent="  ",
        )
    for title, key in (("Waiting", "waiting"), ("Stopped early", "stopped"), ("Failed or killed", "failed")):
        groups = ex.get(key) or []
        if not groups:
            continue
        _heading(title)
        print_rows(
            ["REASON", "TRIALS", "MESSAGE"],
            [[g["reason"], _names(g["trials"]), g["message"]] for g in groups],
            indent="  ",
        )
    if ex.get("unblock"):
        _heading("What would unblock it" if ex["state"] != "Failed" else "What to do")
        for hint in ex["unblock"]:
            console.print(f"  - {hint}", markup=False, highlight=False)
    if ex.get("events"):
        _heading("Recent events")
        print_events(ex["events"], now)


def _names(trials: list[str], shown: int = 4) -> str:
    more = len(trials) - shown
    return ", ".join(trials[:shown]) + (f" and {more} more" if more > 0 else "")


def _field(label: str, value: str) -> None:
    console.print(f"{label + ':':<10}{value}", markup=False, highlight=False)


def _heading(title: str) -> None:
    console.print()
    console.print(Text(f"{title}:", style="bold"))

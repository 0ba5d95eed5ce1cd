"""``muster why experiment/NAME`` as text: the server's explanation
(:mod:`muster.controllers.insight.explain.experiment`, fetched as JSON) rendered for people."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from muster.cli.app import console
from muster.cli.output import print_events, print_field, print_heading, print_rows

__all__ = ["render_experiment"]

_STYLES = {"Running": "green", "Succeeded": "green", "Failed": "red"}


def render_experiment(ex: dict[str, Any], now: datetime | None = None) -> None:
    now = now or datetime.now(UTC)
    console.print(ex["summary"], style=f"bold {_STYLES.get(ex['state'], 'yellow')}", markup=False)
    console.print()
    print_field("State", ex["state"])
    if ex.get("reason"):
        print_field("Reason", ex["reason"])
    if ex.get("message"):
        print_field("Message", ex["message"])
    if ex.get("best"):
        best = ex["best"]
        params = ", ".join(f"{k}={v}" for k, v in best["parameters"].items())
        print_field("Best", f"{best['trial']}: {best['metric']}={best['value']:.6g} ({params})")
    print_field("GPU-time", f"{ex.get('gpuSeconds', 0):.1f} GPU-seconds held by its trials so far")
    if ex.get("running"):
        print_heading("Running")
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
        print_heading(title)
        print_rows(
            ["REASON", "TRIALS", "MESSAGE"],
            [[g["reason"], _names(g["trials"]), g["message"]] for g in groups],
            indent="  ",
        )
    if ex.get("unblock"):
        print_heading("What would unblock it" if ex["state"] != "Failed" else "What to do")
        for hint in ex["unblock"]:
            console.print(f"  - {hint}", markup=False, highlight=False)
    if ex.get("events"):
        print_heading("Recent events")
        print_events(ex["events"], now)


def _names(trials: list[str], shown: int = 4) -> str:
    more = len(trials) - shown
    return ", ".join(trials[:shown]) + (f" and {more} more" if more > 0 else "")

"""``muster api-resources``: the kinds the API serves, as ``kubectl api-resources`` lists them.

The list is :func:`muster.api.kinds.kinds` (the table the server's registry builds its
routes from); ``-o wide`` adds each kind's categories (``muster get all``) and the foreign kinds
converted into it, whose names ``get`` accepts as aliases (``muster get pytorchjobs``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from muster.api import kinds
from muster.api.kinds import API_VERSION
from muster.cli.app import app, console
from muster.cli.output import print_rows

__all__ = ["api_resources"]


class ResourcesOutput(StrEnum):
    table = "table"
    wide = "wide"
    name = "name"


@app.command("api-resources")
def api_resources(
    output: Annotated[
        ResourcesOutput, typer.Option("--output", "-o", help="table, wide or name.")
    ] = ResourcesOutput.table,
    namespaced: Annotated[
        str | None,
        typer.Option(
            "--namespaced",
            help="true: only namespaced kinds; false: only cluster kinds (--namespaced=false).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """List the kinds of the API: names, short names, scope and the manifests converted into them."""
    scope = None if namespaced is None else _boolean(namespaced)
    infos = [i for i in kinds.kinds() if scope is None or i.namespaced == scope]
    if output is ResourcesOutput.name:
        for info in infos:
            console.print(info.plural, markup=False)
        return
    headers = ["NAME", "SHORTNAMES", "APIVERSION", "NAMESPACED", "KIND"]
    rows = [
        [info.plural, ",".join(info.short_names), API_VERSION, str(info.namespaced).lower(), info.kind]
        for info in infos
    ]
    if output is ResourcesOutput.wide:
        headers += ["CATEGORIES", "CONVERTED-FROM"]
        for cells, info in zip(rows, infos, strict=True):
            cells += [",".join(info.categories), ",".join(info.converted_from)]
    print_rows(headers, rows)


def _boolean(text: str) -> bool:
    if text.lower() in ("true", "1", "yes"):
        return True
    if text.lower() in ("false", "0", "no"):
        return False
    raise typer.BadParameter(f"{text!r}: write true or false", param_hint="--namespaced")

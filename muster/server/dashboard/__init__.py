"""The web dashboard ``muster up`` serves at ``/`` (docs/dashboard.md).

The browser side is plain JavaScript modules and CSS under ``static/``, shipped in the
package and served by the server itself: no build step, nothing fetched from elsewhere at
run time. The server side is three small routers: the pages and sign-in (:mod:`.pages`),
one JSON view per page computed with the functions ``muster top``/``muster why`` use
(:mod:`.views`), and a stream of change notices that keeps the pages live (:mod:`.changes`).
Everything but the sign-in page and the static files needs the token (:mod:`muster.server.auth`).
"""

from __future__ import annotations

from fastapi import FastAPI

from muster.server.dashboard import changes, experiments, pages, serving, views

__all__ = ["ROUTERS", "mount_static"]

# In the order they are matched, after the API's routes.
ROUTERS = (pages.router, views.router, experiments.router, serving.router, changes.router)


def mount_static(app: FastAPI) -> None:
    """Serve the dashboard's static files from ``app`` (its routes are :data:`ROUTERS`)."""
    app.mount(
        pages.STATIC_PREFIX, pages.SecureStaticFiles(directory=pages.STATIC_DIR), name="dashboard-static"
    )

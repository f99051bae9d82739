"""The web UI: `GET /` and its built assets under /ui (docs/ui.md). No Node at run time: the
assets are built from services/api/ui/ and ship in the package (services/api/static/)."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

STATIC = Path(__file__).parent / "static"
# Scripts and styles from this origin only (the UI builds every node with textContent; styles
# set by cytoscape.js and the UI's bars need inline style attributes).
HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; connect-src 'self'; "
    "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; object-src 'none'; "
    "base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def install_ui(app: FastAPI) -> None:
    """Serve the UI when its assets are present (they are, in any built package)."""
    if not (STATIC / "index.html").is_file():
        return

    @app.get("/", include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", headers=HEADERS)

    app.mount("/ui", StaticFiles(directory=STATIC), name="ui")

"""The browser demo page: where its files are, and the routes that serve them (``GET /`` and
everything under ``/static/``, subfolders included).

The page's source is the repository's top-level ``static/`` folder. A wheel ships it as package
data, ``gateway/static/`` (``[tool.setuptools.package-dir]`` maps the package ``gateway.static``
to ``static/`` in pyproject.toml), found with :mod:`importlib.resources`. An editable install
(``pip install -e .``) cannot resolve that mapping: setuptools' editable finder only maps packages
with an ``__init__.py``, and ``static/`` holds none. For it, and for a source checkout on
``sys.path``, the page is read from the source tree's ``static/`` beside the ``gateway`` package.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Optional

from aiohttp import web

from gateway.server.errors import ApiError

INDEX = "index.html"


def static_root() -> Optional[Path]:
    """The folder holding the demo page (``index.html`` and its scripts, styles, subfolders):
    the package data of an installed wheel, else the source tree's ``static/`` (editable install,
    checkout); None if neither exists."""
    package = importlib.resources.files("gateway")
    packaged = package / "static"
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    if isinstance(package, Path):
        source = package.parent / "static"  # the repository root holds gateway/ and static/
        if source.is_dir():
            return source
    return None


def add_static_routes(app: web.Application, static_dir: Optional[Path]) -> None:
    """``GET /``: ``static_dir/index.html`` (404 JSON ``not_found`` without it); ``/static/...``:
    any file under ``static_dir``, subfolders included (``/static/js/app.js``), with a content
    type from its extension. Nothing is served from outside ``static_dir``."""

    async def index(request: web.Request) -> web.StreamResponse:
        page = static_dir / INDEX if static_dir is not None else None
        if page is None or not page.is_file():
            raise ApiError(404, f"demo page not found (static/{INDEX})", "not_found")
        return web.FileResponse(page)

    app.router.add_get("/", index)
    if static_dir is not None and static_dir.is_dir():
        app.router.add_static("/static/", static_dir)

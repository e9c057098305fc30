"""The dashboard page (``page.html`` beside this module): one HTML document with inline
CSS, JS and SVG (no CDN, no build step).

The page polls ``api/state`` (relative URLs, so it also works mounted under a
prefix such as ``/dpstream/`` on a Faust app's web server) and draws every
chart as plain SVG. Item labels come from releases, which anyone who can
produce events may influence, so every value is inserted as escaped text.
"""

from __future__ import annotations

from importlib import resources

PAGE = resources.files(__package__).joinpath("page.html").read_text(encoding="utf-8")

"""The docs site built once for the tests of this directory, as `make docs` would serve it."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_HEADING = re.compile(r"<h([1-6])[^>]*>(.*?)</h\1>", re.S)
_TAG = re.compile(r"<[^>]+>")


def text_of(fragment: str) -> str:
    """The words of an HTML fragment, one space between them."""
    return plain(html.unescape(_TAG.sub("", fragment)).replace("¶", ""))


def plain(text: str) -> str:
    """Text as a page shows it: inline code marks gone, whitespace one space."""
    return " ".join(text.replace("`", "").split())


class BuiltPage:
    """A page of the built site, its sections by heading text."""

    def __init__(self, source: str) -> None:
        article = source.split('<article class="md-content__inner md-typeset">', 1)[-1]
        self.html = article.split("</article>", 1)[0]
        self.sections: dict[str, str] = {}
        parts = _HEADING.split(self.html)
        # split gives [before, level, heading, body, level, heading, body, ...]
        for i in range(1, len(parts) - 2, 3):
            self.sections[text_of(parts[i + 1])] = parts[i + 2]

    def section(self, heading: str) -> str:
        assert heading in self.sections, f"no section {heading!r}; have {sorted(self.sections)}"
        return self.sections[heading]


class BuiltSite:
    def __init__(self, root: Path) -> None:
        self.root = root

    def page(self, uri: str) -> BuiltPage:
        """``reference/cli.md`` -> its built page."""
        path = self.root / uri.removesuffix(".md") / "index.html"
        if uri == "index.md":
            path = self.root / "index.html"
        return BuiltPage(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltSite]:
    """`mkdocs build --strict`: a broken link, a missing page or a page left out of the nav
    fails it, and so the tests."""
    site = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},  # a theme's notice, not our warning
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"mkdocs build --strict failed:\n{done.stderr}"
    yield BuiltSite(site)

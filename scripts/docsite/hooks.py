"""mkdocs hooks (`hooks:` in mkdocs.yml): the reference pages are generated from the code at every build, so a
command, option, status or problem name added to the code is in the next site without anyone writing it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `docsite`: mkdocs loads this file by path

from docsite import generated  # noqa: E402


def on_files(files, config):
    """Add each generated page to the site's files (mkdocs builds the nav after this event)."""
    from mkdocs.structure.files import File

    for uri, text in generated.pages().items():
        files.append(File.generated(config, uri, content=text))
    return files

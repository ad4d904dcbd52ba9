"""The wheel's package list (pyproject.toml lists them by hand: the prompts folder ships from outside the package)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_ships_in_the_wheel() -> None:
    """A folder left out installs fine in the editable checkout and fails only from a wheel (the doctor command did)."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(init.parent.relative_to(ROOT).parts) for init in (ROOT / "kernel_agent").rglob("__init__.py")}
    assert found - listed == set()


def test_every_data_file_ships_in_the_wheel() -> None:
    """Templates, migrations' script and prompts are found as package data from a wheel only when listed (the
    Hugging Face export's templates in export/templates/hf/ were not: `export --format hf-kernels` failed with
    TemplateNotFound from an installed wheel and worked from the checkout)."""
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    globs = setuptools["package-data"]["kernel_agent"]
    data = [
        path.relative_to(ROOT / "kernel_agent")
        for path in (ROOT / "kernel_agent").rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc")
    ]
    missing = [
        str(path)
        for path in data
        if not any(path.match(glob) and len(path.parts) == len(Path(glob).parts) for glob in globs)
    ]
    assert missing == []
    prompts = {p.name for p in (ROOT / "prompts").iterdir() if p.suffix == ".j2"}
    assert prompts and setuptools["package-data"]["kernel_agent.prompts"] == ["*.j2"]

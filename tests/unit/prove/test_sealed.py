"""The seal over a whole package (export/seal.py) and its check (prove/shipped.py), on small real folders."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernel_agent.core.certificate import FILE_NAME, Bundle
from kernel_agent.export.hf_kernels import write_metadata
from kernel_agent.export.seal import seal
from kernel_agent.prove.shipped import PackageError, Variant, copy_sealed, tampered


def pip_package(root: Path) -> Variant:
    package = root / "mine"
    (package / "_runtime").mkdir(parents=True)
    (package / "__init__.py").write_text("from ._runtime.dispatch import call\n")
    (package / "_runtime" / "dispatch.py").write_text("def call():\n    return 1\n")
    (root / "pyproject.toml").write_text("[project]\nname = 'mine'\n")
    (package / FILE_NAME).write_text(json.dumps(Bundle("mine", "pip", "pip", []).to_json()))
    seal(package, "pip")
    return Variant(package, Bundle.from_json(json.loads((package / FILE_NAME).read_text())))


def test_a_sealed_package_passes_and_each_kind_of_change_is_named(tmp_path: Path) -> None:
    variant = pip_package(tmp_path)
    assert set(variant.bundle.manifest) == {"pyproject.toml", "mine/__init__.py", "mine/_runtime/dispatch.py"}
    assert tampered(variant) == []
    (variant.folder / "__pycache__").mkdir()
    (variant.folder / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\x00" * 16)
    (tmp_path / "torch.py").write_text("raise SystemExit\n")  # beside the package: shadows torch on its sys.path
    with (variant.folder / "_runtime" / "dispatch.py").open("a") as handle:
        handle.write("# edited\n")
    lines = tampered(variant)
    assert any(line.startswith("mine/__pycache__/__init__.cpython-311.pyc: bytecode") for line in lines), lines
    assert "torch.py: not in the certificate's manifest (added after export; Python could load it)" in lines
    assert any(line.startswith("mine/_runtime/dispatch.py: sha256 differs") for line in lines), lines


def test_the_copy_holds_the_manifest_only_and_refuses_a_file_changed_after_the_check(tmp_path: Path) -> None:
    variant = pip_package(tmp_path / "package")
    (variant.folder / "extra.py").write_text("print('not sealed')\n")
    copy = copy_sealed(variant, tmp_path / "copy")
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if p.is_file()) == [
        "__init__.py",
        "_runtime/dispatch.py",
        FILE_NAME,
    ]
    (variant.folder / "__init__.py").write_text("import os\n")
    with pytest.raises(PackageError, match=r"^mine/__init__.py: sha256 differs"):
        copy_sealed(variant, tmp_path / "again")


def test_an_hf_variants_metadata_is_sealed_less_its_digest_list(tmp_path: Path) -> None:
    variant = tmp_path / "build" / "torch-cpu"
    variant.mkdir(parents=True)
    (variant / "__init__.py").write_text("x = 1\n")
    (variant / FILE_NAME).write_text(json.dumps(Bundle("mine", "hf-kernels", "cpu", []).to_json()))
    meta = {"id": "_mine_cpu", "name": "mine", "version": 1, "kernel-agent": {}}
    seal(variant, "hf-kernels", meta)
    write_metadata(variant, meta)
    sealed = Variant(variant, Bundle.from_json(json.loads((variant / FILE_NAME).read_text())))
    assert tampered(sealed) == []
    data = json.loads((variant / "metadata.json").read_text())
    assert FILE_NAME in data["digest"]["files"]  # what kernels checks: the certificate file is in its digest
    data["python-depends"] = ["evil-package"]
    (variant / "metadata.json").write_text(json.dumps(data))
    assert tampered(sealed) == ["metadata.json: sha256 differs from the certificate's manifest (changed after export)"]

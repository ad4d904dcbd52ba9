"""Wave-4 classes A, C and E through the export's real paths (THREATS rows X1 to X4).

A: a package changed after export in any file Python could load (an edited `__init__.py` or runtime file, a
planted `__pycache__` file that Python would prefer to the certified source, an extra module, a `.pth`, a data
file, a symlink) is refused by the real `verify-package` and `e2e` commands with a one-line reason naming the
file, before anything of it runs. The packages are written by the exporter's own writers (both formats); their
certificate is a plain record, as nothing is measured before the refusal.
C: winners right only where they can tell kernel-agent runs them (export_fixtures/c_*.py) are refused by the
export's plain run, which looks like a user's process and draws its inputs after the winner is loaded.
E: a winner's writes (site-packages, the package folder, the tool's caches, the shared temp folders) do not
land or outlive the plain run; what a sandbox leaves in the host's /tmp and /dev/shm is gone after its
evaluation.
"""

from __future__ import annotations

import dataclasses
import io
import json
import os
import py_compile
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from adversarial.common import ROOT, SOFTMAX, load_fixture
from kernel_agent.core.certificate import Certificate, Checks, Device, Origin, Review, VerdictPart
from kernel_agent.core.config import IsolationLevel
from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
from kernel_agent.export.files import ExportedKernel
from kernel_agent.export.formats import Format
from kernel_agent.export.package import write_package
from kernel_agent.export.plain_check import plain_check
from kernel_agent.export.user_process import UserProcess
from kernel_agent.problem.load import load_problem
from kernel_agent.prove.shipped import open_package, tampered

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "export_fixtures"
RECIPE = f"{ROOT / 'examples' / 'models' / 'cpu_transformer.py'}:build"
WORDS = ("kernel", "agent", "sandbox", "plain")
NAME = "softmaxes"


def certificate() -> Certificate:
    return Certificate(
        kernel="softmax64",
        problem="softmax64",
        kind="native",
        backend="torch",
        variant="",
        run_id=1,
        candidate_id=2,
        problem_hash="",
        reference_sha256="",
        baseline_sha256="",
        candidate_sha256="",
        diff_vs_baseline="",
        verdict=VerdictPart("faster", "", 1.5, [1.4, 1.6], "95%", 4, 2, ""),
        checks=Checks(3, 3, [[1, 1]], [[256, 2048]], ["float32"], ["normal"], {}, {}),
        isolation="bwrap",
        device=Device("cpu", "cpu", None, None, 1, None),
        versions={},
        review=Review([], [], None, None, None),
        origin=Origin("seed", "seed", None, None, None, None),
        evaluated_at="2026-12-06T00:00:00",
    )


HONEST = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n"


def exported(out: Path, fmt: Format, source: str = HONEST, name: str = "softmax64") -> Path:
    """A package of a softmax winner, written by the exporter's own writers."""
    k = ExportedKernel(
        name=name,
        problem=name,
        run_id=1,
        candidate_id=2,
        source=source,
        reference_source=(SOFTMAX / "problem.py").read_text(),
        backend="torch",
        verified=[("cpu", "float32")],
        tolerances={"float32": (1e-5, 1e-6)},
        speedup=1.5,
        ci=(1.4, 1.6),
        baseline_ms=2.0,
        candidate_ms=1.3,
        device="cpu",
        device_name="cpu",
        isolation="bwrap",
        environment={},
        date="2026-12-06",
        status="faster",
        review="",
        reverified="3/3 checks passed",
        baseline_source=(SOFTMAX / "kernel.py").read_text(),
        evidence=dataclasses.replace(certificate(), kernel=name, problem=name),
    )
    write_package(out, NAME, [1], [k], [], fmt)
    return out


@pytest.fixture(scope="module")
def packages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("sealed")
    return {"pip": exported(work / "pip", Format.PIP), "hf": exported(work / "hf", Format.HF_KERNELS)}


def folder(root: Path, fmt: str) -> Path:
    """The folder users import: the pip package's, the hf-kernels cpu variant's."""
    return root / NAME if fmt == "pip" else root / "build" / "torch-cpu"


def same_size_source(original: Path, text: str) -> str:
    """`text` padded with a comment to the byte length of `original` (a timestamp pyc records the size too)."""
    size = original.stat().st_size
    assert len(text) < size, "the original is too short to stand in for"
    return text + "#" * (size - len(text) - 1) + "\n"


def planted_timestamp_pyc(root: Path, fmt: str) -> str:
    """Bytecode of other code whose header matches `__init__.py`'s mtime and size: Python loads it instead."""
    init = folder(root, fmt) / "__init__.py"
    fake = Path(tempfile.mkdtemp()) / "__init__.py"
    fake.write_text(same_size_source(init, "raise SystemExit('planted bytecode ran')\n"))
    stat = init.stat()
    os.utime(fake, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    target = Path(__import__("importlib.util").util.cache_from_source(str(init)))
    py_compile.compile(str(fake), cfile=str(target), doraise=True)
    return target.relative_to(root).as_posix()


def planted_hash_pyc(root: Path, fmt: str) -> str:
    """Unchecked-hash bytecode: Python never compares it with its source at all."""
    init = folder(root, fmt) / "__init__.py"
    fake = Path(tempfile.mkdtemp()) / "__init__.py"
    fake.write_text("raise SystemExit('planted bytecode ran')\n")
    target = Path(__import__("importlib.util").util.cache_from_source(str(init)))
    py_compile.compile(
        str(fake), cfile=str(target), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    return target.relative_to(root).as_posix()


def append(relative: str, text: str) -> Callable[[Path, str], str]:
    def change(root: Path, fmt: str) -> str:
        path = folder(root, fmt) / relative
        with path.open("a") as handle:
            handle.write(text)
        return path.relative_to(root).as_posix()

    return change


def add(relative: str, text: str) -> Callable[[Path, str], str]:
    def change(root: Path, fmt: str) -> str:
        path = folder(root, fmt) / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return path.relative_to(root).as_posix()

    return change


def link(root: Path, fmt: str) -> str:
    path = folder(root, fmt) / "_extra.py"
    path.symlink_to("/etc/hostname")
    return path.relative_to(root).as_posix()


def unsealed(root: Path, fmt: str) -> str:
    """A package as exported before the seal: its certificate file without a manifest."""
    path = folder(root, fmt) / "certificate.json"
    data = json.loads(path.read_text())
    data.pop("manifest")
    path.write_text(json.dumps(data))
    return "certificate.json"


WRONG = "import torch\n_real = torch.softmax\ntorch.softmax = lambda x, dim=-1: _real(x, dim=dim) * 1.03\n"
TAMPERING: dict[str, tuple[Callable[[Path, str], str], str]] = {
    "edited_init": (append("__init__.py", "\n" + WRONG), "changed after export"),
    "pyc_matching_timestamp": (planted_timestamp_pyc, "bytecode the certificate does not cover"),
    "pyc_unchecked_hash": (planted_hash_pyc, "bytecode the certificate does not cover"),
    "extra_module": (add("_runtime/_speedups.py", WRONG), "not in the certificate's manifest"),
    "pth_file": (add("zz_hook.pth", "import os\n"), "not in the certificate's manifest"),
    "edited_runtime": (append("_runtime/dispatch.py", "\n" + WRONG), "changed after export"),
    "data_file": (add("softmax64_scale.json", '{"scale": 1.03}\n'), "not in the certificate's manifest"),
    "symlink": (link, "not a regular file"),
    "no_manifest": (unsealed, "no manifest of the package's files"),
}


def cli(*commands: tuple[str, ...]) -> list[subprocess.CompletedProcess[str]]:
    """Each command through the real CLI, side by side (each one's start is mostly importing torch)."""
    started = [
        subprocess.Popen(
            [sys.executable, "-m", "kernel_agent", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for args in commands
    ]
    done = []
    for args, process in zip(commands, started):
        out, err = process.communicate(timeout=300)
        done.append(subprocess.CompletedProcess(args, process.returncode, out, err))
    return done


def test_every_file_of_both_formats_is_sealed_and_a_fresh_export_passes(packages: dict[str, Path]) -> None:
    for fmt, root in packages.items():
        shipped = open_package(root)
        (variant,) = [v for v in shipped.variants if fmt == "pip" or v.name == "cpu"]
        assert tampered(variant) == []
        base = root if fmt == "pip" else variant.folder
        every = {p.relative_to(base).as_posix() for p in base.rglob("*") if p.is_file()}
        own = f"{NAME}/certificate.json" if fmt == "pip" else "certificate.json"
        assert every - set(variant.bundle.manifest) == {own}, fmt
        assert {"pyproject.toml", f"{NAME}/__init__.py", f"{NAME}/_runtime/dispatch.py"} <= every or fmt == "hf"


@pytest.mark.parametrize("fmt", ["pip", "hf"])
@pytest.mark.parametrize("name", list(TAMPERING))
def test_a_package_changed_after_export_is_refused_before_anything_runs(
    packages: dict[str, Path], tmp_path: Path, name: str, fmt: str
) -> None:
    change, why = TAMPERING[name]
    copy = tmp_path / fmt
    shutil.copytree(packages[fmt], copy, symlinks=True)
    relative = change(copy, fmt)
    if name == "pyc_matching_timestamp" and fmt == "pip":  # the attack is real: plain Python runs the planted code
        ran = subprocess.run(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(copy)!r}); import {NAME}"],
            capture_output=True,
            text=True,
        )
        assert "planted bytecode ran" in ran.stderr, ran.stderr
    verify, e2e = cli(
        ("verify-package", str(copy), "--sandbox", str(tmp_path / "sandbox")),
        ("e2e", str(copy), "--model", RECIPE, "--no-store"),
    )
    assert verify.returncode == 2 and why in verify.stderr and Path(relative).name in verify.stderr, verify.stderr
    assert verify.stderr.count("\n") == 1 and "verifying" not in verify.stderr  # one line; nothing evaluated
    assert e2e.returncode == 2 and "refused" in e2e.stderr and why in e2e.stderr, e2e.stderr


C_FIXTURES = sorted(FIXTURES.glob("c_*.py"))


@pytest.mark.parametrize("path", C_FIXTURES, ids=[p.stem for p in C_FIXTURES])
def test_a_winner_right_only_under_kernel_agent_is_refused_by_the_plain_run(path: Path) -> None:
    fixture = load_fixture(path)
    assert fixture.expect == "refused"
    reason = plain_check(load_problem(SOFTMAX), path.read_text(), "cpu", 120)
    assert reason is not None and fixture.reason in reason and "\n" not in reason, reason


REPORT = r"""
import os
import sys

cmdline = open(f"/proc/{os.getppid()}/cmdline", "rb").read().decode(errors="replace")
seen = {
    "argv": " ".join(sys.argv), "cwd": os.getcwd(), "file": __file__, "parent": cmdline,
    "modules": " ".join(sys.modules), "env": " ".join(f"{k}={v}" for k, v in os.environ.items()),
    "uid": os.getuid(), "files": " ".join(os.listdir(".")), "driver": open(__file__).read(),
}
serve(seen, lambda x: x)
"""


def test_the_plain_run_looks_like_a_users_process_and_is_not_root() -> None:
    with UserProcess(REPORT, {}, 60) as process:
        seen = torch.load(io.BytesIO(process.loaded()), weights_only=True)
    seen["parent"] = seen["parent"].replace(sys.executable, "python")  # the interpreter is the tool's (THREATS X2)
    for key in ("argv", "cwd", "file", "parent", "modules", "files", "driver"):
        assert not any(word in seen[key].lower() for word in WORDS), (key, seen[key])
    # No variable of the tool's; bash's `_` names the program it ran, the interpreter, not kernel-agent.
    assert not [w for w in seen["env"].split() if w.startswith("KERNEL_AGENT")], seen["env"]
    assert [w for w in seen["env"].split() if w.startswith("_=")] in ([], [f"_={sys.executable}"])
    if os.geteuid() == 0:
        assert seen["uid"] not in (0, 65534)


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user the plain run keeps that user's uid (THREATS X3)")
def test_a_winners_writes_do_not_land_where_the_tool_or_the_user_reads_later(tmp_path: Path) -> None:
    out = Path(tempfile.mkdtemp(prefix="exported-"))  # a package folder any uid can reach, as a user's would be
    os.chmod(out, 0o755)
    cache = Path.home() / ".cache" / "kernel-agent"
    fixture = load_fixture(FIXTURES / "e_writes.py")
    source = fixture.path.read_text().replace("__OUT__", str(out)).replace("__CACHE__", str(cache))
    targets = [
        *(Path(p) / "zz_planted_by_candidate.pth" for p in sys.path if p.endswith("-packages")),
        out / "zz_planted_by_candidate.py",
        out / "__init__.py",
        cache / "tolerances" / "zz_planted_by_candidate.json",
        cache / "builds" / "zz_planted_by_candidate.so",
        *(Path(p) / "zz_planted_by_candidate" for p in ("/tmp", "/dev/shm", "/var/tmp")),
    ]
    before = {t for t in targets if t.exists()}
    try:
        assert plain_check(load_problem(SOFTMAX), source, "cpu", 120) is None  # right answers: it ships
        landed = [str(t) for t in targets if t.exists() and t not in before]
        assert landed == [], landed
    finally:
        for t in targets:
            if t not in before:
                t.unlink(missing_ok=True)
        shutil.rmtree(out, ignore_errors=True)


@pytest.mark.parametrize("level", ["unshare", "process"])
def test_what_a_sandbox_leaves_in_the_shared_temp_folders_is_gone_after_its_evaluation(
    tmp_path: Path, level: str
) -> None:
    if os.geteuid() != 0:
        pytest.skip("only a sandbox of another uid is swept (THREATS X4)")
    tag = f"zz-left-{uuid.uuid4().hex[:8]}"
    fixture = load_fixture(FIXTURES / "e_leftovers.py")
    source = fixture.path.read_text().replace("__TAG__", tag)
    options = EvalOptions(
        sandbox_root=tmp_path / "sandbox", timeout=60.0, timing_rounds=2, threads=1, isolation=IsolationLevel(level)
    )
    try:
        verdict = evaluate(load_problem(SOFTMAX), source, options)
    except RuntimeError as exc:  # the level does not start here
        pytest.skip(str(exc))
    assert verdict.correct, verdict.reason
    left = [p for base in ("/tmp", "/dev/shm", "/var/tmp") for p in Path(base).glob(f"{tag}*")]
    assert left == [], left


@pytest.mark.skipif(os.geteuid() != 0, reason="as another user e2e runs in that user's process (THREATS X3)")
def test_e2e_runs_a_sealed_package_that_writes_as_a_uid_of_its_own(tmp_path: Path) -> None:
    """A package whose kernel writes a `.pth` into site-packages and a file into the tool's cache when imported
    (sealed: it was exported so) runs in `e2e` swapped into the bundled model; none of its writes land."""
    cache = Path.home() / ".cache" / "kernel-agent"
    source = load_fixture(FIXTURES / "e_writes.py").path.read_text()
    source = source.replace("__OUT__", str(tmp_path / "out")).replace("__CACHE__", str(cache))
    targets = [
        *(Path(p) / "zz_planted_by_candidate.pth" for p in sys.path if p.endswith("-packages")),
        cache / "tolerances" / "zz_planted_by_candidate.json",
        *(Path(p) / "zz_planted_by_candidate" for p in ("/tmp", "/dev/shm", "/var/tmp")),
    ]
    before = {t for t in targets if t.exists()}
    root = exported(tmp_path / "out", Format.PIP, source, name="cpp_softmax")  # the layer the bundled model has
    try:
        (run,) = cli(("e2e", str(root), "--model", RECIPE, "--no-store", "--rounds", "2", "--json"))
        assert run.returncode == 0, run.stderr[-2000:]
        data = json.loads(run.stdout)
        assert [op["kernel"] for op in data["ops"]] == ["cpp_softmax"] and data["package"] == str(root), data
        landed = [str(t) for t in targets if t.exists() and t not in before]
        assert landed == [], landed
    finally:
        for t in targets:
            if t not in before:
                t.unlink(missing_ok=True)

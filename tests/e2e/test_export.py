"""Review and export end to end: real CLI processes, a real SQLite file, a real `pip install` of the exported folder."""

from __future__ import annotations

import ast
import json
import sqlite3
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from conftest import run_cli
from review_runs import build_run, cli_with_input

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return build_run(tmp_path_factory.mktemp("export"))


def copy_db(source: Path, target: Path) -> Path:
    """A consistent copy (WAL included) so tests that record decisions do not see each other's."""
    with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
        src.backup(dst)
    return target


def export(run: dict, db: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "export",
        str(run["run_id"]),
        "--out",
        str(out),
        "--name",
        "mykernels",
        "--db",
        str(db),
        "--sandbox",
        str(run["sandbox"]),
        "--threads",
        "1",
        *extra,
    )


def imported_modules(source: str) -> set[str]:
    """Top-level names of every absolute import in a module."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def make_venv(path: Path) -> Path:
    """A fresh venv that sees this environment's packages (torch, pip, setuptools, pytest) without reinstalling them."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(path)], check=True)
    python = path / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def install(out: Path, tmp_path: Path) -> Path:
    """pip-install an exported folder into a fresh venv; its python."""
    python = make_venv(tmp_path / "venv")
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation", str(out)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return python


def probe(python: Path, script: str, tmp_path: Path) -> dict:
    """Run a script in the venv; the JSON object it prints last."""
    proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def package_tests(python: Path, out: Path, tmp_path: Path) -> str:
    """The exported package's own tests, run in the venv: their summary line."""
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(out / "tests")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return proc.stdout.strip().splitlines()[-1]


def test_exported_package_installs_dispatches_and_passes_its_tests(run: dict, tmp_path: Path) -> None:
    out = tmp_path / "exported"
    proc = export(run, run["db"], out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "re-verifying softmax64" in proc.stderr and "exported softmax64" in proc.stdout
    package = out / "mykernels"
    assert {p.name for p in package.iterdir()} >= {
        "__init__.py",
        "_cpp.py",
        "_kernel_softmax64.py",
        "_reference_softmax64.py",
    }
    assert "kernel_agent" not in (out / "pyproject.toml").read_text()
    for source in package.glob("*.py"):
        assert "kernel_agent" not in imported_modules(source.read_text()), source
    rows = (out / "benchmarks.csv").read_text().splitlines()
    assert (
        rows[0].startswith("kernel,problem,run,candidate")
        and f"softmax64,softmax64,{run['run_id']},{run['best']},faster" in rows[1]
    )
    assert "torch" in rows[0] and "isolation" in rows[0] and "speedup" in (out / "BENCHMARKS.md").read_text()

    python = install(out, tmp_path)
    script = (
        "import json, os, sys, torch, mykernels\n"
        "x = torch.randn(8, 33)\n"
        "y = mykernels.softmax64(x)\n"
        "first = mykernels.last_path('softmax64')\n"
        "assert torch.allclose(y, torch.softmax(x, -1), atol=1e-6)\n"
        "mykernels.softmax64(x.double())\n"
        "unverified = mykernels.last_path('softmax64')\n"
        "os.environ['MYKERNELS_FORCE_REFERENCE'] = '1'\n"
        "mykernels.softmax64(x)\n"
        "print(json.dumps({'file': mykernels.__file__, 'first': first, 'unverified': unverified,"
        " 'forced': mykernels.last_path('softmax64'),"
        " 'kernel_agent': any(m.startswith('kernel_agent') for m in sys.modules)}))\n"
    )
    seen = probe(python, script, tmp_path)
    assert seen["file"].startswith(str(tmp_path / "venv")), seen
    assert (seen["first"], seen["unverified"], seen["forced"]) == ("optimized", "reference", "reference")
    assert seen["kernel_agent"] is False

    summary = package_tests(python, out, tmp_path)
    assert " passed" in summary and "failed" not in summary

    forced = subprocess.run(
        [str(python), "-c", "import mykernels; print(mykernels.implementation('softmax64', 'cpu', 'float32'))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"MYKERNELS_FORCE_REFERENCE": "1", "PATH": "/usr/bin:/bin"},
    )
    assert forced.stdout.strip() == "reference", forced.stderr


def test_review_decisions_persist_and_gate_export(run: dict, tmp_path: Path) -> None:
    db = copy_db(run["db"], tmp_path / "review.db")
    best = str(run["best"])
    approved_only = export(run, db, tmp_path / "unreviewed", "--approved-only")
    assert approved_only.returncode == 0 and "no approved candidate" in approved_only.stderr
    assert not (tmp_path / "unreviewed" / "mykernels" / "_kernel_softmax64.py").exists()

    rejected = run_cli(
        "review", "reject", best, "--note", "reads past the row end", "--db", str(db), env={"USER": "alice"}
    )
    assert rejected.returncode == 0, rejected.stderr
    with sqlite3.connect(db) as connection:
        assert connection.execute("select decision, reviewer, note from reviews").fetchall() == [
            ("reject", "alice", "reads past the row end")
        ]
    for extra in ((), ("--approved-only",)):
        proc = export(run, db, tmp_path / f"rejected{len(extra)}", *extra)
        assert proc.returncode == 0 and "not exported: softmax64" in proc.stderr, proc.stderr
        assert not (tmp_path / f"rejected{len(extra)}" / "mykernels" / "_kernel_softmax64.py").exists()

    approved = run_cli("review", "approve", best, "--db", str(db), env={"USER": "bob"})
    assert approved.returncode == 0 and "approved by bob" in approved.stdout
    proc = export(run, db, tmp_path / "approved", "--approved-only")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "approved" / "mykernels" / "_kernel_softmax64.py").exists()
    assert ",approve," in (tmp_path / "approved" / "benchmarks.csv").read_text()


def test_interactive_review_from_a_pipe_approves(run: dict, tmp_path: Path) -> None:
    db = copy_db(run["db"], tmp_path / "interactive.db")
    proc = cli_with_input("review", "latest", "--db", str(db), stdin="a\nchecked the diff\n")
    assert proc.returncode == 0, proc.stderr[-2000:]
    # the speedup and its interval, or `re-timing` for an early look too wide to quote (conftest: --no-retime-best)
    quoted = "95% interval" in proc.stdout or "speedup    re-timing" in proc.stdout
    assert "speedup" in proc.stdout and quoted and "diff against the baseline" in proc.stdout
    assert "+    return torch.softmax(x, dim=-1)" in proc.stdout
    assert f"candidate {run['best']} (softmax64): approved by pipe-reviewer" in proc.stdout
    with sqlite3.connect(db) as connection:
        assert connection.execute("select candidate_id, decision, reviewer, note from reviews").fetchall() == [
            (run["best"], "approve", "pipe-reviewer", "checked the diff")
        ]
    quit_early = cli_with_input("review", str(run["run_id"]), "--kernel", "softmax64", "--db", str(db), stdin="q\n")
    assert quit_early.returncode == 0 and "stopped; 0 decision(s) recorded" in quit_early.stdout


def test_unknown_ids_are_one_line_exit_2(run: dict, tmp_path: Path) -> None:
    db = str(run["db"])
    cases = [
        (("review", "approve", "99999", "--db", db), "no candidate 99999"),
        (("review", "reject", "99999", "--db", db), "no candidate 99999"),
        (("review", "424242", "--db", db), "no run 424242"),
        (("report", "424242", "-o", str(tmp_path / "r.html"), "--db", db), "no run 424242"),
        (("export", "424242", "--out", str(tmp_path / "x"), "--name", "pkg", "--db", db), "no run 424242"),
        (
            ("export", "latest", "--out", str(tmp_path / "x"), "--name", "Bad-Name", "--db", db),
            "lowercase Python identifier",
        ),
        (("runs", "show", "424242", "--db", db), "no run 424242"),
    ]
    for args, needle in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert needle in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1, proc.stderr
    shown = json.loads(run_cli("runs", "show", "latest", "--db", db, "--json").stdout)
    assert shown["run_id"] == run["run_id"]


KB_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernelbench"


def test_kernelbench_winner_exports_as_a_module_with_the_reference_weights(tmp_path: Path) -> None:
    kb = build_run(tmp_path, problem=KB_FIXTURES / "kb_rowloop.py", candidate=KB_FIXTURES / "kb_rowloop_new.py")
    out = tmp_path / "exported"
    proc = export(kb, kb["db"], out)
    assert proc.returncode == 0 and "exported kb_rowloop" in proc.stdout, proc.stderr[-3000:]
    python = install(out, tmp_path)
    script = (
        "import json, os, torch, mykernels\n"
        "from mykernels import _reference_kb_rowloop as ref\n"
        "torch.manual_seed(1)\n"
        "module = mykernels.kb_rowloop()\n"
        "x = torch.randn(16, 4096)\n"
        "with torch.no_grad():\n"
        "    y = module(x)\n"
        "    first = mykernels.last_path('kb_rowloop')\n"
        "    same = torch.allclose(y, module.reference(x), atol=1e-6)\n"
        "    other = ref.Model(4096)\n"  # new weights, loaded through the wrapper, must reach the optimized copy
        "    module.load_state_dict(other.state_dict())\n"
        "    loaded = torch.allclose(module(x), other(x), atol=1e-6)"
        " and mykernels.last_path('kb_rowloop') == 'optimized'\n"
        "    os.environ['MYKERNELS_FORCE_REFERENCE'] = '1'\n"
        "    module(x)\n"
        "print(json.dumps({'first': first, 'same': same, 'loaded': loaded,"
        " 'forced': mykernels.last_path('kb_rowloop'), 'kind': type(module.optimized).__name__}))\n"
    )
    seen = probe(python, script, tmp_path)
    assert seen == {"first": "optimized", "same": True, "loaded": True, "forced": "reference", "kind": "ModelNew"}
    assert package_tests(python, out, tmp_path).startswith("5 passed")


def test_a_winner_honest_only_inside_the_sandbox_is_refused_by_both_formats(tmp_path: Path) -> None:
    """Issue 31 D: it reads faster in the sandbox (nothing there can look like a user's process to it); the
    export runs it once more in a plain process, where it returns zeros, and ships nothing."""
    aware = Path(__file__).parents[1] / "adversarial" / "fixtures" / "w3d_sandbox_aware.py"
    built = build_run(tmp_path, candidate=aware)
    for fmt in ("pip", "hf-kernels"):
        proc = export(built, built["db"], tmp_path / f"out-{fmt}", "--format", fmt)
        said = proc.stdout + proc.stderr
        assert "in a plain process (outside the sandbox) it is wrong" in said, said[-3000:]
        assert "exported softmax64" not in said

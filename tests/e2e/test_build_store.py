"""The trusted build store (issue 11, class C): private to the trusted side, bounded by a quota with
LRU eviction, one library per evaluation in its own folder, builds under time and size limits."""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kernel_agent import cpp
from kernel_agent.evaluate.backends import build_store as store
from kernel_agent.evaluate.backends import lint as checks
from kernel_agent.evaluate.backends.base import BuildContext, BuildFailed
from kernel_agent.evaluate.backends.cpp_build import build_in_sandbox
from kernel_agent.evaluate.backends.registry import get_backend
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.host.isolation import (
    Limits,
    package_dir,
    prepare_workdir,
    sandbox_env,
    walls_command,
    wrap,
)
from kernel_agent.sandbox.host.levels import probe

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "adversarial" / "fixtures"
SMALL = 'extern "C" int answer(void) { return %d; }\n'
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox uid differs from ours only when running as root")


def context(tmp_path: Path, **kwargs: object) -> BuildContext:
    return BuildContext(store=tmp_path / "store", isolation=probe(), sandbox_root=tmp_path / "sandbox", **kwargs)  # type: ignore[arg-type]


def fake_library(folder: Path, name: str, size: int, mtime: float) -> Path:
    path = folder / f"{name}.so"
    path.write_bytes(b"\0" * size)
    os.utime(path, (mtime, mtime))
    return path


# ---- store bookkeeping ---------------------------------------------------------------------------


def test_eviction_removes_least_recently_used_until_under_quota(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store.secure(folder)
    now = time.time()
    for index in range(5):
        fake_library(folder, f"lib{index}", 1000, now - 100 + index)  # lib0 oldest
    assert store.lookup(folder, "lib0") is not None  # a use makes lib0 the most recent
    newest = fake_library(folder, "new", 1000, now)
    removed = store.evict(folder, 3500, keep=(newest,))
    assert removed == ["lib1.so", "lib2.so", "lib3.so"]
    assert sorted(p.name for p in folder.glob("*.so")) == ["lib0.so", "lib4.so", "new.so"]
    assert store.usage(folder) == 3000


def test_eviction_never_removes_the_library_just_built(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store.secure(folder)
    kept = fake_library(folder, "big", 5000, time.time() - 1000)
    assert store.evict(folder, 1000, keep=(kept,)) == []
    assert kept.exists()


def test_stale_staging_copies_are_cleaned_and_fresh_ones_kept(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store.secure(folder)
    stale, fresh = folder / ".abc.so.1.x", folder / ".abc.so.2.y"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (time.time() - 2 * store.STALE_STAGING_S,) * 2)
    store.evict(folder, 1 << 30)
    assert not stale.exists() and fresh.exists()


def test_lookup_drops_entries_over_the_cap_and_non_files(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store.secure(folder)
    fake_library(folder, "huge", 2048, time.time())
    assert store.lookup(folder, "huge", cap=1024) is None
    assert not (folder / "huge.so").exists()
    (folder / "link.so").symlink_to("/etc/passwd")
    assert store.lookup(folder, "link") is None and not (folder / "link.so").is_symlink()


def test_insert_refuses_a_library_over_the_cap(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store.secure(folder)
    built = tmp_path / "kernel.so"
    built.write_bytes(b"\0" * 4096)
    with pytest.raises(store.LibraryTooLarge, match="over the 0 MB per-library limit"):
        store.insert(folder, "k", built, cap=1024)
    assert list(folder.iterdir()) == []


def test_store_is_private_and_quota_parses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "store"
    folder.mkdir(mode=0o755)
    store.secure(folder)
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (
        store.parse_bytes("2G") == 2 << 30
        and store.parse_bytes("512M") == 512 << 20
        and store.parse_bytes("123") == 123
    )
    monkeypatch.setenv(store.QUOTA_ENV, "10M")
    assert context(tmp_path).quota_bytes == 10 << 20


# ---- real builds with gcc, in the real sandbox ------------------------------------------------------


def test_each_evaluation_sees_only_its_own_library(tmp_path: Path) -> None:
    build = context(tmp_path)
    backend = get_backend("cpp")
    sources = [f"CPP_SOURCE = r'''{SMALL % n}'''\nLIB = load_library(CPP_SOURCE)\n" for n in (1, 2)]
    prepared = [backend.prepare(src, "cpu", tmp_path / f"work{n}", build) for n, src in enumerate(sources)]
    assert len(list(build.store.glob("*.so"))) == 2
    for n, (src, prep) in enumerate(zip(sources, prepared)):
        view = tmp_path / f"work{n}" / store.VIEW
        key = cpp.build_key(checks.module_string_literal(ast.parse(src), "CPP_SOURCE"))
        assert [p.name for p in view.iterdir()] == [f"{key}.so"]
        assert prep.extra_ro == (view,) and build.store not in prep.extra_ro
        assert Path(prep.build_store).resolve() == view.resolve() and not any("KERNEL_AGENT" in k for k in prep.env)
        assert view.stat().st_uid == os.geteuid() and (view / f"{key}.so").stat().st_uid == os.geteuid()
    assert build.store.stat().st_mode & 0o777 == 0o700


def test_the_candidate_loads_its_library_and_cannot_list_the_store(tmp_path: Path) -> None:
    """In the real sandbox: load_library finds the placed library; the store is not there."""
    build = context(tmp_path)
    source = f"CPP_SOURCE = r'''{SMALL % 42}'''\n"
    work = tmp_path / "work"
    prepared = get_backend("cpp").prepare(source, "cpu", work, build)
    from kernel_agent.sandbox.host.isolation import prepare_workdir, sandbox_env

    prepare_workdir(work, build.isolation.uid)
    script = (
        "import os, sys\nfrom kernel_agent.cpp import load_library\n"
        f"print(load_library({SMALL % 42!r}).answer())\n"
        f"try:\n    print(os.listdir({str(build.store)!r}))\nexcept OSError as exc:\n    print(type(exc).__name__)\n"
    )
    command = wrap([sys.executable, "-c", script], build.isolation, work, extra_ro=prepared.extra_ro)
    env = sandbox_env({"PYTHONPATH": str(ROOT), **prepared.env}, work)
    proc = subprocess.run(command, env=env, cwd=work, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.split()
    assert lines[0] == "42" and lines[1] in ("FileNotFoundError", "PermissionError"), proc.stdout


@ROOT_ONLY
def test_the_store_is_unreadable_to_the_sandbox_uid_without_namespaces(tmp_path: Path) -> None:
    """The process level sees the whole file system: the store's mode keeps it from uid 65534, and Landlock from
    root without capabilities (where a private folder above the venv makes the sandbox run so). Read as a worker
    would, through the level's walls."""
    base = Path(tempfile.mkdtemp(dir="/tmp"))  # traversable parents, unlike pytest's 0700 tmp_path
    try:
        base.chmod(0o755)
        library = build_in_sandbox(
            SMALL % 7, BuildContext(store=base / "store", isolation=probe(), sandbox_root=tmp_path / "sandbox")
        )
        level = probe("process")
        work = base / "work"
        prepare_workdir(work, level.uid)
        control = work / "open.txt"
        control.write_text("readable")
        command = wrap(walls_command(["cat", str(control), str(library)], level, work), level, work)
        env = sandbox_env({"PYTHONPATH": str(package_dir().parent)}, work)
        proc = subprocess.run(command, capture_output=True, timeout=60, env=env, cwd=work)
        assert proc.stdout == b"readable" and b"Permission denied" in proc.stderr, (level, proc)
    finally:
        shutil.rmtree(base)


def test_the_store_keeps_its_quota_after_each_build(tmp_path: Path) -> None:
    first = build_in_sandbox(SMALL % 1, context(tmp_path))
    size = first.stat().st_size
    os.utime(first, (time.time() - 60,) * 2)
    second = build_in_sandbox(SMALL % 2, context(tmp_path, quota_bytes=int(size * 1.5)))
    assert second.exists() and not first.exists()
    assert store.usage(tmp_path / "store") <= size * 1.5


def test_a_huge_initialized_array_stops_at_the_size_cap_and_stores_nothing(tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(BuildFailed, match="256 MB file-size limit"):
        build_in_sandbox(
            'static char big[2250000000] = {1, 2, 3};\nextern "C" char at(long i) { return big[i]; }\n',
            context(tmp_path),
        )
    assert time.monotonic() - started < 30
    assert list((tmp_path / "store").iterdir()) == []
    assert list((tmp_path / "sandbox").iterdir()) == []  # the build folder went too


BUSY = """
constexpr unsigned long spin(unsigned long seed) {
    unsigned long x = seed;
    for (unsigned long i = 0; i < 2000; ++i)
        for (unsigned long j = 0; j < 2000; ++j) x = x * 6364136223846793005UL + j;
    return x;
}
#define ONE(n) constexpr unsigned long v##n = spin(n);
#define TEN(n) ONE(n##0) ONE(n##1) ONE(n##2) ONE(n##3) ONE(n##4) ONE(n##5) ONE(n##6) ONE(n##7) ONE(n##8) ONE(n##9)
TEN(1) TEN(2) TEN(3)
extern "C" unsigned long value(void) { return v10 ^ v39; }
"""


def test_a_busy_compile_stops_at_the_evaluations_deadline(tmp_path: Path) -> None:
    build = context(tmp_path, deadline=Deadline(3).start())
    started = time.monotonic()
    with pytest.raises(BuildFailed, match=r"ran past its 3 s time limit \(what was left of the evaluation's timeout\)"):
        build_in_sandbox(BUSY, build)
    assert time.monotonic() - started < 5
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p).find(str(tmp_path)) >= 0]
    assert not left, "the compiler outlived its build"


def test_a_busy_compile_stops_at_the_cpu_limit(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed, match="hit the 2 s CPU-time limit"):
        build_in_sandbox(BUSY, context(tmp_path, cpu_seconds=2))


def test_no_time_left_means_no_build(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed, match="timeout is spent"):
        build_in_sandbox(SMALL % 3, context(tmp_path, deadline=Deadline(0).start()))


def test_build_rlimits_come_from_the_evaluations_limits(tmp_path: Path) -> None:
    with pytest.raises(BuildFailed, match="1 MB file-size limit"):
        build_in_sandbox(
            'static char big[4000000] = {1};\nextern "C" char at(long i) { return big[i]; }\n',
            context(tmp_path, limits=Limits(file_bytes=1 << 20)),
        )


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


# ---- the foreign-library fixture is a real attack -------------------------------------------------


def test_the_foreign_key_fixture_targets_real_libraries_that_the_trusted_side_could_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its FOREIGN sources are the cpp_softmax example's, built into the persistent store here; run
    with the store readable (as the trusted side), its search finds them. The sandboxed run must not."""
    sys.path.insert(0, str(ROOT / "tests"))
    from adversarial.common import load_fixture, run_fixture

    spec = importlib.util.spec_from_file_location("c50_foreign_key", FIXTURES / "c50_foreign_key.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    examples = [
        ROOT / "examples" / "cpp_softmax" / "candidates" / "faster.py",
        ROOT / "examples" / "cpp_softmax" / "kernel.py",
    ]
    assert module.FOREIGN == [checks.module_string_literal(ast.parse(p.read_text()), "CPP_SOURCE") for p in examples]
    persistent = cpp.default_store()
    for source in module.FOREIGN:
        build_in_sandbox(source, BuildContext(store=persistent, isolation=probe(), sandbox_root=tmp_path / "builds"))
    monkeypatch.setattr(module, "STORES", [str(persistent)])
    assert module._find() is not None  # readable store: the attack works
    verdict = run_fixture(load_fixture(FIXTURES / "c50_foreign_key.py"), tmp_path / "sandbox")
    assert verdict.status == "runtime_error" and "foreign library: none loadable" in verdict.reason, verdict.reason

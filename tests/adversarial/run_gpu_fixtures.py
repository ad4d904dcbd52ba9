"""Evaluate the GPU-only adversarial fixtures (THREATS.md rows 1, 2, 22, 32 and section 1.I) on a CUDA device
through the real evaluation path, on either data path, and print expected against observed. Without a GPU it
lists the plan and exits 0 (`--list` does so anywhere); `scripts/gpu-check` runs it on a lent GPU.

    python tests/adversarial/run_gpu_fixtures.py [--gpu-data host|device] [--rounds N] [--json OUT] [--only NAME]

A fixture's docstring may add, beside ROW/EXPECT/REASON/OPTIONS/PROBLEM:
    EXPECT_DEVICE / REASON_DEVICE   what the device path must answer where it sees more than the host path
    LOAD: device                    the runner loads the GPU from a second process while the fixture is evaluated
After a fixture whose verdict is `timeout`, the honest control is evaluated again: the next evaluation must work.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LOADER = "import torch\nx = torch.randn(8192, 8192, device='cuda')\nwhile True:\n    x = torch.tanh(x @ x)\n"


def field(path: Path, name: str) -> str | None:
    match = re.search(rf"^{name}:[ \t]*(.*)$", path.read_text().split('"""')[1], re.MULTILINE)
    return match.group(1).strip() if match else None


def expectation(path: Path, gpu_data: str) -> tuple[str, str]:
    """(allowed statuses, reason alternatives) on this data path."""
    expect, reason = field(path, "EXPECT") or "", field(path, "REASON") or ""
    if gpu_data == "device" and field(path, "EXPECT_DEVICE"):
        return field(path, "EXPECT_DEVICE") or expect, field(path, "REASON_DEVICE") or ""
    return expect, reason


@contextmanager
def device_load(wanted: bool):
    """A second process on the GPU for the fixture's whole evaluation (THREATS I7), when it asks for one."""
    if not wanted:
        yield
        return
    loader = subprocess.Popen([sys.executable, "-c", LOADER])
    try:
        yield
    finally:
        loader.kill()
        loader.wait()


def evaluate_one(path: Path, args: argparse.Namespace) -> dict:
    from adversarial.common import load_fixture
    from kernel_agent.core.config import GpuData
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem

    fixture = load_fixture(path)
    problem_dir = fixture.problem if field(path, "PROBLEM") else HERE / "problems" / "softmax_cuda"
    timeout = float(fixture.options.get("timeout", 120))
    with tempfile.TemporaryDirectory() as tmp, device_load(field(path, "LOAD") == "device"):
        options = EvalOptions(
            device="cuda",
            sandbox_root=Path(tmp),
            timing_rounds=args.rounds,
            timeout=timeout,
            gpu_data=GpuData(args.gpu_data),
        )
        verdict = evaluate(load_problem(problem_dir), path.read_text(), options)
    expect, reason = expectation(path, args.gpu_data)
    ok = verdict.status in expect.split("|") and any(r in verdict.reason for r in reason.split("|"))
    return {
        "fixture": path.stem,
        "row": fixture.row,
        "gpu_data": args.gpu_data,
        "expected": expect,
        "observed": str(verdict.status),
        "ok": ok,
        "speedup": verdict.speedup,
        "reason": verdict.reason[:200],
        "isolation": verdict.isolation,
    }


def show(row: dict) -> None:
    """One table row, printed as it is measured."""
    reason = row["reason"][:100].replace("|", "/")
    verdict = "ok" if row["ok"] else "BAD"
    print(
        f"| {verdict} | {row['fixture']} | {row['row']} | {row['gpu_data']} | {row['expected']} | "
        f"{row['observed']} | {reason} |",
        flush=True,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--gpu-data", choices=("host", "device"), default="host")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--only", help="the fixtures whose name contains this")
    parser.add_argument("--list", action="store_true", help="print each fixture's expectation and exit")
    args = parser.parse_args()
    paths = [p for p in sorted((HERE / "gpu_fixtures").glob("*.py")) if not args.only or args.only in p.stem]
    import torch

    if args.list or not torch.cuda.is_available():
        print("" if args.list else "no CUDA device: GPU fixtures skipped; the plan:")
        for path in paths:
            expect, _ = expectation(path, args.gpu_data)
            print(f"plan {path.stem:30s} row {field(path, 'ROW') or '?':8s} {args.gpu_data:6s} expect {expect}")
        return 0
    control = HERE / "gpu_fixtures" / "g00_honest_control.py"
    rows: list[dict] = []
    for path in paths:
        rows.append(evaluate_one(path, args))
        show(rows[-1])
        if rows[-1]["observed"] == "timeout":  # the device must still serve the next evaluation
            rows.append({**evaluate_one(control, args), "fixture": f"g00_honest_control (after {path.stem})"})
            show(rows[-1])
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))  # after each: a cut run keeps what it measured
    failures = sum(not row["ok"] for row in rows)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

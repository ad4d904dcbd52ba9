"""Evaluate the GPU-only adversarial fixtures (THREATS.md rows 1, 2, 22, 32, ...) on a CUDA
device and print expected vs observed. Skips cleanly (exit 0) without a GPU.

    python tests/adversarial/run_gpu_fixtures.py [--rounds N] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: GPU fixtures skipped")
        return 0
    from adversarial.common import load_fixture
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem

    problem = load_problem(HERE / "problems" / "softmax_cuda")
    rows, failures = [], 0
    for path in sorted((HERE / "gpu_fixtures").glob("*.py")):
        fixture = load_fixture(path)
        with tempfile.TemporaryDirectory() as tmp:
            verdict = evaluate(
                problem,
                path.read_text(),
                EvalOptions(device="cuda", sandbox_root=Path(tmp), timing_rounds=args.rounds, timeout=120),
            )
        ok = verdict.status in fixture.expect.split("|") and any(r in verdict.reason for r in fixture.reason.split("|"))
        failures += not ok
        row = {
            "fixture": path.stem,
            "row": fixture.row,
            "expected": fixture.expect,
            "observed": verdict.status,
            "ok": ok,
        }
        rows.append({**row, "speedup": verdict.speedup, "reason": verdict.reason[:160], "isolation": verdict.isolation})
        print(
            f"{'ok ' if ok else 'BAD'} {path.stem:28s} row {fixture.row:8s} "
            f"expected {fixture.expect:24s} observed {verdict.status:13s} {verdict.reason[:100]}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

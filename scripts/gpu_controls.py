"""The controls of a data path (issue 35's goals): N A/A verdicts (the baseline's own code as the candidate: no
false accept, speedups within 1%) and a 2x-slower candidate (the baseline called twice: 0.50 +- 0.03), all in
one orchestrator process, one JSON line per verdict written as it comes (a cut run keeps what it measured).

    python scripts/gpu_controls.py PROBLEM --device cuda --gpu-data device --aa 20 --slow 1 --json OUT.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SLOWER = "\n\n_once = kernel\n\n\ndef kernel(*args):\n    _once(*args)\n    return _once(*args)\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("problem", type=Path)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--gpu-data", choices=("host", "device"), default="host")
    parser.add_argument("--aa", type=int, default=20)
    parser.add_argument("--slow", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    from kernel_agent.core.config import GpuData
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem

    problem = load_problem(args.problem)
    runs = [("A/A", problem.baseline_source)] * args.aa + [("2x slower", problem.baseline_source + SLOWER)] * args.slow
    args.json.write_text("")
    with tempfile.TemporaryDirectory() as sandbox:
        for kind, source in runs:
            options = EvalOptions(
                device=args.device,
                sandbox_root=Path(sandbox),
                timing_rounds=args.rounds,
                timeout=args.timeout,
                gpu_data=GpuData(args.gpu_data),
            )
            began = time.monotonic()
            verdict = evaluate(problem, source, options)
            row = {
                "kind": kind,
                "gpu_data": args.gpu_data,
                "status": str(verdict.status),
                "speedup": verdict.speedup,
                "ci": verdict.speedup_ci,
                "seconds": round(time.monotonic() - began, 2),
                "reason": verdict.reason[:200],
            }
            with args.json.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

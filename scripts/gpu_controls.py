"""The controls of a data path (issue 35's goals): N A/A verdicts (the baseline's own code as the candidate: no
false accept, speedups within 1%), a 2x-slower candidate (the baseline called twice: 0.50 +- 0.03) and, for issue
36's resolution goal, 3% gains (a baseline that also runs itself on 3% of the rows, benchmarks/resolution.py's
control: FAST at the device's 1% resolution target). All in one orchestrator process, one JSON line per verdict
written as it comes (a cut run keeps what it measured); each line carries the speed class, the smallest gain the
verdict could show (MDE) and its interval's half-width.

    python scripts/gpu_controls.py PROBLEM --device cuda --gpu-data device --aa 20 --slow 1 --gain3 4 --json OUT
"""

from __future__ import annotations

import argparse
import itertools
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
    parser.add_argument("--gain3", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    from benchmarks.resolution import make_control
    from kernel_agent.core.config import GpuData
    from kernel_agent.evaluate.pipeline import EvalOptions, evaluate
    from kernel_agent.problem.load import load_problem

    problem = load_problem(args.problem)
    args.json.write_text("")
    with tempfile.TemporaryDirectory() as sandbox:
        gain3 = load_problem(make_control(args.problem.resolve(), Path(sandbox), 0.03)) if args.gain3 else None
        kinds = [
            [("A/A", problem, problem.baseline_source)] * args.aa,
            [("2x slower", problem, problem.baseline_source + SLOWER)] * args.slow,
            [("3% gain", gain3, problem.baseline_source)] * args.gain3,
        ]
        runs = [run for turn in itertools.zip_longest(*kinds) for run in turn if run]  # in turn: a cut run has each
        for kind, timed, source in runs:
            options = EvalOptions(
                device=args.device,
                sandbox_root=Path(sandbox),
                timing_rounds=args.rounds,
                timeout=args.timeout,
                gpu_data=GpuData(args.gpu_data),
            )
            began = time.monotonic()
            verdict = evaluate(timed, source, options)
            resolution = verdict.timing.resolution if verdict.timing is not None else None
            low, high = verdict.speedup_ci or (None, None)
            row = {
                "kind": kind,
                "gpu_data": args.gpu_data,
                "status": str(verdict.status),
                "speedup": verdict.speedup,
                "ci": verdict.speedup_ci,
                "class": resolution.speed_class if resolution else None,
                "mde": resolution.mde if resolution else None,
                "half_width": (high / low) ** 0.5 - 1 if low and high else None,
                "ended_by": resolution.ended_by if resolution else None,
                "seconds": round(time.monotonic() - began, 2),
                "reason": verdict.reason[:200],
            }
            with args.json.open("a") as out:
                out.write(json.dumps(row) + "\n")
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

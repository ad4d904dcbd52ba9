"""What per-shape config dispatch adds to each call of an exported kernel (runtime/dispatch.py).

Usage: python benchmarks/dispatch_overhead.py [--calls 20000]
Builds a throwaway package holding a trivial kernel (it returns its input) twice, once as the winner and once
as a tuned-config variant, with a 12-shape tuned table, and times `Registry.call` three ways in one process,
interleaved: the winner with no tables (what every export did before), a call whose shape picks the variant,
and a call whose shape picks the winner's own config. Prints microseconds per call (median of 7 batches).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from kernel_agent.export.runtime.dispatch import Registry
from kernel_agent.export.runtime.tuned import cpu_name, table_file

KERNEL = "def kernel(x):\n    return x\n"
REFERENCE = "def reference(x):\n    return x\n\ndef shape_of(x):\n    return tuple(x.shape)\n"


def build(folder: Path) -> tuple[Registry, Registry]:
    package = folder / "dispatch_bench_pkg"
    package.mkdir()
    for name, source in {"__init__.py": "", "_kernel_k.py": KERNEL, "_kernel_k_config0.py": KERNEL,
                         "_reference_k.py": REFERENCE}.items():  # fmt: skip
        (package / name).write_text(source)
    tuned = package / "tuned"
    tuned.mkdir()
    entries = [{"shape": {"n": 2**i}, "config": {"S": 2 if i < 6 else 1}} for i in range(12)]
    table_file(tuned, "k", cpu_name()).write_text(json.dumps({"default": {"S": 1}, "configs": entries}))
    sys.path.insert(0, str(folder))
    spec = {"module": "_kernel_k", "reference": "_reference_k", "verified": [["cpu", "float32"]]}
    plain = Registry("dispatch_bench_pkg", {"k": dict(spec)})
    tuned_spec = spec | {"default_config": {"S": 1}, "shape_names": ["n"],
                         "configured": {"cpu": [[{"S": 2}, "_kernel_k_config0"]]}}  # fmt: skip
    return plain, Registry("dispatch_bench_pkg", {"k": tuned_spec}, tuned)


def per_call(registry: Registry, x: torch.Tensor, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        registry.call("k", (x,), {})
    return (time.perf_counter() - started) / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, tuned = build(Path(tmp))
        cases = {"no tables (before)": (plain, torch.ones(4)), "tuned: the variant": (tuned, torch.ones(4)),
                 "tuned: the winner's own config": (tuned, torch.ones(2048))}  # fmt: skip
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(7):
            for name, (registry, x) in cases.items():
                times[name].append(per_call(registry, x, args.calls))
        base = statistics.median(times["no tables (before)"])
        print("| call | us per call (median of 7) | added |\n|---|---|---|")
        for name, values in times.items():
            median = statistics.median(values)
            print(f"| {name} | {median:.2f} | {median - base:+.2f} |")


if __name__ == "__main__":
    main()

"""Batch throughput: evaluations per minute with 1 and 2 workers, and LLM latency overlap.

Usage: python benchmarks/batch_throughput.py [--candidates N]
1. Evaluates the same N correct candidates of tests/fixtures/softmax64 through the
   local executor with 1 and then 2 workers (timed runs never overlap: the device
   gate serialises them; compiles and checks overlap).
2. Sends 8 chat-completion requests, each answered after 1 s by the scripted local
   server, through the real OpenAI provider at concurrency 1 and 4.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "e2e")]

from scripted_server import ScriptedServer  # noqa: E402

from kernel_agent.evaluate.pipeline import EvalOptions  # noqa: E402
from kernel_agent.optimize.executors.local import LocalExecutor  # noqa: E402
from kernel_agent.problem.load import load_problem  # noqa: E402
from kernel_agent.propose.base import ProposalContext  # noqa: E402
from kernel_agent.propose.openai_chat import OpenAIProvider  # noqa: E402

EXPRESSIONS = [
    "torch.softmax(x, dim=-1)",
    "torch.softmax(x, -1)",
    "x.softmax(dim=-1)",
    "torch.nn.functional.softmax(x, dim=-1)",
    "torch.softmax(x.contiguous(), dim=-1)",
    "torch.softmax(x, dim=1)",
    "torch.special.softmax(x, dim=-1)",
    "x.softmax(-1)",
]


def candidate(expression: str) -> str:
    return f"import torch\n\n\ndef kernel(x):\n    return {expression}\n"


def evaluations_per_minute(workers: int, count: int) -> tuple[float, float, list[str]]:
    problem = load_problem(ROOT / "tests" / "fixtures" / "softmax64")
    executor = LocalExecutor(workers)
    options = EvalOptions(threads=1, sandbox_root=ROOT / "sandbox")
    started = time.perf_counter()
    futures = [executor.submit(problem, candidate(EXPRESSIONS[i % len(EXPRESSIONS)]), options) for i in range(count)]
    statuses = [f.result().status for f in futures]
    elapsed = time.perf_counter() - started
    executor.shutdown()
    return count / elapsed * 60, elapsed, statuses


def llm_wall_time(concurrency: int, requests: int = 8, latency: float = 1.0) -> float:
    reply = "```python\nimport torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n```"
    with ScriptedServer([{"sleep": latency, "reply": reply} for _ in range(requests)]) as server:
        provider = OpenAIProvider(base_url=server.base_url, model="scripted", api_key="sk-bench", max_retries=0)
        problem = load_problem(ROOT / "tests" / "fixtures" / "softmax64")
        slots = threading.BoundedSemaphore(concurrency)

        def one(index: int) -> None:
            context = ProposalContext(
                problem=problem,
                baseline_source=problem.baseline_source,
                parents=[],
                history=[],
                profile={"request": index},
                round=index + 1,
                samples=1,
                device="cpu",
            )
            with slots:
                provider.propose(context)

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=requests) as pool:
            list(pool.map(one, range(requests)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=int, default=8)
    args = parser.parse_args()
    console = Console()
    table = Table(title=f"Evaluations of {args.candidates} correct softmax64 candidates (CPU, 1 thread per kernel)")
    for column in ("workers", "wall s", "evaluations / minute", "verdicts"):
        table.add_column(column)
    rates = {}
    for workers in (1, 2):
        rate, elapsed, statuses = evaluations_per_minute(workers, args.candidates)
        rates[workers] = rate
        table.add_row(
            str(workers),
            f"{elapsed:.1f}",
            f"{rate:.1f}",
            ", ".join(f"{s} {statuses.count(s)}" for s in sorted(set(statuses))),
        )
    console.print(table)
    console.print(f"2 workers / 1 worker throughput: {rates[2] / rates[1]:.2f}x")
    llm = Table(title="8 chat-completion requests, 1 s scripted latency each, real OpenAI SDK over HTTP")
    for column in ("concurrency", "wall s"):
        llm.add_column(column)
    for concurrency in (1, 4):
        llm.add_row(str(concurrency), f"{llm_wall_time(concurrency):.2f}")
    console.print(llm)


if __name__ == "__main__":
    main()

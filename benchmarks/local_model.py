"""What a local model's replies become over N rounds: parsed, compiled, correct, faster.

Why: the loop's LLM path was only ever tested against scripted replies. This runs `kernel-agent optimize` against
a real model on this machine (the bundled SmolLM2-135M-Instruct by default, served by llama.cpp; or any
OpenAI-compatible --base-url) and counts, per round, what happened to each reply:

- replies: choices the model returned;
- parsed: replies holding a module that defines the entry point (the rest carry a stored reason);
- repeats: parsed modules the run had already evaluated (not evaluated again);
- compiled: evaluated candidates that got past the static checks and the build (not rejected, not compile_error);
- correct: candidates that passed every check (correct, faster or flagged);
- faster: candidates accepted as faster.

    .venv/bin/python benchmarks/local_model.py --rounds 10 --samples 2    # needs pip install 'kernel-agent[local]'
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernel_agent.propose.local_model import MODEL_ALIAS, server_command  # noqa: E402

NOT_BUILT = ("rejected", "compile_error")
CORRECT = ("correct", "faster", "flagged")


def serve(threads: int) -> tuple[subprocess.Popen, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = server_command(port, threads=threads)
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                return server, base_url
        except OSError:
            time.sleep(0.5)
    server.kill()
    raise SystemExit("the llama.cpp server did not start in 120 s")


def optimize(args: argparse.Namespace, base_url: str, db: Path, work: Path) -> float:
    command = [sys.executable, "-m", "kernel_agent", "optimize", str(args.problem), "--provider", "openai"]
    command += ["--base-url", base_url, "--model", args.model, "--rounds", str(args.rounds)]
    command += ["--samples", str(args.samples), "--patience", str(args.rounds), "--db", str(db)]
    command += ["--sandbox", str(work / "sandbox"), "--threads", "1", "--no-references", "--no-retime-best"]
    command += ["--max-tokens-per-reply", str(args.max_tokens), "--json"]
    started = time.monotonic()
    env = {**os.environ, "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "local")}
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"optimize failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.monotonic() - started


def counts(db: Path) -> tuple[dict[int, Counter], dict[str, int]]:
    """Per round: what each reply became; and what the model was asked and answered in all."""
    with sqlite3.connect(db) as connection:
        per_round: dict[int, Counter] = {}
        for round_, responses in connection.execute("select round, responses from llm_calls where not cached"):
            per_round.setdefault(round_, Counter())["replies"] += len(json.loads(responses))
        rows = connection.execute(
            "select c.round, c.parse_error, e.status from candidates c left join evaluations e "
            "on e.candidate_id = c.id where c.origin = 'openai'"
        )
        for round_, parse_error, status in rows:
            tally = per_round.setdefault(round_, Counter())
            if parse_error is not None:
                tally["reasons"] += 1
                continue
            tally["parsed"] += 1
            tally["compiled"] += status is not None and status not in NOT_BUILT
            tally["correct"] += status in CORRECT
            tally["faster"] += status == "faster"
            tally[f"status {status}"] += 1
        (duplicates,) = connection.execute("select coalesce(sum(duplicates), 0) from run_kernels").fetchone()
        tokens = connection.execute(
            "select coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), count(*) from llm_calls"
        ).fetchone()
        reasons = Counter(
            (r.split(":")[0] if r else "")
            for (r,) in connection.execute("select parse_error from candidates where parse_error is not null")
        )
    return per_round, {
        "repeats": duplicates,
        "prompt_tokens": tokens[0],
        "completion_tokens": tokens[1],
        "calls": tokens[2],
        **{f"reason: {k}": v for k, v in reasons.most_common(5)},
    }


def table(per_round: dict[int, Counter]) -> str:
    columns = ("replies", "parsed", "compiled", "correct", "faster")
    lines = ["| round | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    total: Counter = Counter()
    for round_ in sorted(per_round):
        total.update(per_round[round_])
        lines.append(f"| {round_} | " + " | ".join(str(per_round[round_][c]) for c in columns) + " |")
    lines.append("| all | " + " | ".join(f"**{total[c]}**" for c in columns) + " |")
    statuses = ", ".join(f"{k[7:]} {v}" for k, v in sorted(total.items()) if k.startswith("status "))
    return "\n".join(lines) + (f"\n\nverdicts of the parsed candidates: {statuses}" if statuses else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", type=Path, default=ROOT / "examples" / "torch_opchain")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=768)
    parser.add_argument("--base-url", help="an OpenAI-compatible server already up (default: start the bundled one)")
    parser.add_argument("--model", default=MODEL_ALIAS)
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for the bundled model's server")
    args = parser.parse_args()
    server = None
    base_url = args.base_url
    if base_url is None:
        server, base_url = serve(args.threads)
    try:
        with tempfile.TemporaryDirectory() as work:
            db = Path(work) / "runs.db"
            seconds = optimize(args, base_url, db, Path(work))
            per_round, totals = counts(db)
    finally:
        if server is not None:
            server.terminate()
            server.wait(10)
    print(f"model {args.model} at {base_url}; problem {args.problem.name}; {args.rounds} rounds of {args.samples}")
    print(f"wall time {seconds:.0f} s; " + "; ".join(f"{k} {v}" for k, v in totals.items()))
    print()
    print(table(per_round))


if __name__ == "__main__":
    main()

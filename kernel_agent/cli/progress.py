"""A live progress display on stderr for optimization runs (rich)."""

from __future__ import annotations

import threading
import time
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from kernel_agent.core.verdict import Status


class LoopProgress:
    """One line per kernel (round, evaluated/accepted, best speedup, failures by status) and one for the run."""

    def __init__(self, console: Console, kernels: list[str], rounds: int) -> None:
        self.progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=console,
            transient=False,
        )
        self.overall = self.progress.add_task("run: starting")
        self.tasks = {name: self.progress.add_task(f"{name}: waiting", start=False) for name in kernels}
        self.state: dict[str, dict[str, Any]] = {
            name: {"evaluated": 0, "accepted": 0, "best": None, "round": 0, "failures": {}, "done": False}
            for name in kernels
        }
        self.rounds = rounds
        self.tokens, self.cost, self.started = 0, 0.0, time.monotonic()
        self.lock = threading.Lock()
        self.running = False

    def __enter__(self) -> LoopProgress:
        self.progress.start()
        self.running = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self.running:
            self.progress.stop()
            self.running = False

    def event(self, kind: str, data: dict[str, Any]) -> None:
        with self.lock:
            self._event(kind, data)
            self._overall()

    def _event(self, kind: str, data: dict[str, Any]) -> None:
        name = data["kernel"]
        state, task = self.state[name], self.tasks[name]
        if kind == "baseline":
            self.progress.start_task(task)
            text = "measuring the baseline"
        elif kind == "round":
            self.progress.start_task(task)
            state["round"] = data["round"]
            text = f"round {data['round']}: asking the provider"
        elif kind == "llm":
            self.tokens += data["tokens"]
            self.cost += data["cost"]
            return
        elif kind == "streaming":
            text = f"round {state['round']}: receiving the reply, {data['tokens']} tokens"
        elif kind == "note":  # one line above the display, kept in the terminal's scrollback
            self.progress.console.print(f"{name}: {data['text']}", markup=False, highlight=False, soft_wrap=True)
            return
        elif kind == "references":
            text = f"measuring the torch {data['reference']} reference point"
        elif kind == "evaluate":
            text = f"round {state['round']}: evaluating candidate {data['candidate']} {data.get('note', '')[:30]}"
        elif kind == "retime":
            text = f"re-timing candidate {data['candidate']} with all rounds"
        elif kind == "evaluated":
            state["evaluated"] += 1
            if data["status"] == Status.FASTER:
                state["accepted"] += 1
                state["best"] = max(state["best"] or 0, data["speedup"] or 0)
            elif data["status"] not in (Status.CORRECT, Status.FLAGGED):
                state["failures"][data["status"]] = state["failures"].get(data["status"], 0) + 1
            text = f"round {state['round']}: candidate {data['candidate']} {data['status']}"
        else:  # done: the best's number of record replaces the early looks seen on the way
            state["done"] = True
            text = f"done: {data['status']}"
            self.progress.stop_task(task)
        best = f"{state['best']:.2f}x" if state["best"] else "-"
        if state["done"] and data.get("cell"):
            best = data["cell"]
        failures = ", ".join(f"{k} {v}" for k, v in sorted(state["failures"].items()))
        self.progress.update(
            task,
            description=f"{name}: {text} | evaluated {state['evaluated']}, accepted {state['accepted']}, best {best}"
            + (f" | {failures}" if failures else ""),
        )

    def _overall(self) -> None:
        elapsed = time.monotonic() - self.started
        total = len(self.state) * self.rounds
        done = sum(self.rounds if s["done"] else max(0, s["round"] - 1) for s in self.state.values())
        eta = f"{elapsed / done * (total - done):.0f} s" if done else "-"
        finished = sum(1 for s in self.state.values() if s["done"])
        self.progress.update(
            self.overall,
            description=(
                f"run: {finished}/{len(self.state)} kernels done | tokens {self.tokens} | ${self.cost:.4f} | ETA {eta}"
            ),
        )

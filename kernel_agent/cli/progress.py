"""A live progress display on stderr for optimization runs (rich)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class LoopProgress:
    """One line per kernel: round, candidates evaluated/accepted, best speedup, last status."""

    def __init__(self, console: Console, kernels: list[str]) -> None:
        self.progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=False)
        self.tasks = {name: self.progress.add_task(f"{name}: waiting", start=False) for name in kernels}
        self.state: dict[str, dict[str, Any]] = {name: {"evaluated": 0, "accepted": 0, "best": None, "round": 0} for name in kernels}

    def __enter__(self) -> LoopProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def event(self, kind: str, data: dict[str, Any]) -> None:
        name = data["kernel"]
        state, task = self.state[name], self.tasks[name]
        if kind == "baseline":
            self.progress.start_task(task)
            text = "measuring the baseline"
        elif kind == "round":
            state["round"] = data["round"]
            text = f"round {data['round']}: asking the provider"
        elif kind == "evaluate":
            text = f"round {state['round']}: evaluating candidate {data['candidate']} {data.get('note', '')[:40]}"
        elif kind == "evaluated":
            state["evaluated"] += 1
            if data["status"] == "faster":
                state["accepted"] += 1
                state["best"] = max(state["best"] or 0, data["speedup"] or 0)
            text = f"round {state['round']}: candidate {data['candidate']} {data['status']}"
        else:  # done
            text = f"done: {data['status']}"
            self.progress.stop_task(task)
        best = f"{state['best']:.2f}x" if state["best"] else "-"
        self.progress.update(task, description=f"{name}: {text} | evaluated {state['evaluated']}, accepted {state['accepted']}, best {best}")

"""The live display shows the tokens of a reply streaming in, and an endpoint lesson as one kept line."""

from __future__ import annotations

import io

from rich.console import Console

from kernel_agent.cli.progress import LoopProgress


def test_streamed_tokens_show_on_the_kernels_line_and_a_lesson_prints_once() -> None:
    out = io.StringIO()
    progress = LoopProgress(Console(file=out, width=200, force_terminal=False), ["softmax"], rounds=2)
    progress.event("round", {"kernel": "softmax", "round": 1})
    progress.event("streaming", {"kernel": "softmax", "tokens": 321})
    task = progress.tasks["softmax"]
    assert "receiving the reply, 321 tokens" in progress.progress.tasks[task].description
    progress.event("note", {"kernel": "softmax", "text": "http://h/v1 gpt-5: omits temperature; sent again"})
    assert out.getvalue().count("softmax: http://h/v1 gpt-5: omits temperature; sent again") == 1

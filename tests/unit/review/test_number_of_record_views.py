"""Issue 39: one number of record in every view. A run is built through the real optimize loop (KernelLoop, its
Recorder, a real SQLite file) with scripted verdicts: the best reads 5.156x [1.800, 25.629] at an early look, and
its re-timing with every round reads 1.475x [1.350, 1.610], faster. Every view is read from its real output: the
optimize end table and --json, `runs show` and --json (fast_p included), `candidates list` and --json, the HTML
report, `review`, and both export formats. Each quotes the re-timing; the early look appears only labelled as
such. A second run whose wide early look was never re-timed shows no number for it at all, only `re-timing`.

Nothing here starts a sandbox or a process: the executor is scripted, and export's re-verification and plain-process
run of the winner (which their own e2e tests cover) are stubs; every file export writes is real.
"""

from __future__ import annotations

import csv
import io
import json
import re
from concurrent.futures import Future
from pathlib import Path

import pytest
from conftest import timing_record
from typer.testing import CliRunner

from kernel_agent.cli import app
from kernel_agent.cli.optimize_cmd import render_summary
from kernel_agent.core.config import ReferenceConfig
from kernel_agent.core.timing_result import Stopping
from kernel_agent.core.verdict import Verdict
from kernel_agent.db.reads import run_detail
from kernel_agent.db.review_reads import run_kernels
from kernel_agent.db.session import Database, open_database
from kernel_agent.db.writes import create_run, finish_run
from kernel_agent.evaluate.pipeline import EvalOptions
from kernel_agent.optimize.config import SearchConfig
from kernel_agent.optimize.kernel_loop import KernelLoop, LoopOptions, Shared
from kernel_agent.optimize.search_state import KernelResult
from kernel_agent.problem.load import Problem, load_problem
from kernel_agent.propose.base import Proposal, ProposalBatch, ProposalContext
from kernel_agent.review.report.charts import roofline_data

SOFTMAX = Path(__file__).resolve().parents[2] / "fixtures" / "softmax64"
REWRITE = "import torch\n\n\ndef kernel(x):\n    return torch.softmax(x, dim=-1)\n"
EARLY = (5.156, (1.800, 25.629))  # what the early look read
RETIMED = (1.475, (1.350, 1.610))  # what every round read: the number of record


def verdict(status: str, speedup: float, ci: tuple[float, float], early: bool) -> Verdict:
    """A timed verdict as the evaluation stores it: both times from one A/B run, and whether a look stopped it."""
    stopping = Stopping(rule="sequential", settled_early=True) if early else Stopping(rule="fixed rounds")
    timing = timing_record(speedup, ci, rounds=4 if early else 10, stopping=stopping)
    shape = {"shape": [256, 2048], "dtype": "float32", "flops": 2.0e6, "intensity": 0.25}
    roofline = {
        "device": "cpu",
        "memory_gbps": 10.0,
        "gflops": {"float32": 100.0},
        "shapes": [{**shape, "baseline_median_ms": 2.0, "candidate_median_ms": 2.0 / speedup}],
    }
    return Verdict(
        status=status,
        correct=True,
        speedup=speedup,
        speedup_ci=list(ci),
        device="cpu",
        backend="torch",
        isolation="process",
        timing=timing,
        roofline=roofline,
        tolerances={"float32": {"rtol": 1e-4, "atol": 1e-6}},
        environment={"device_name": "test cpu", "torch": "2.13.0", "threads": 1, "python": "3.11"},
    )


class Scripted:
    """An executor that answers each evaluation the loop asks for: the baseline's A/A run, the rewrite's early
    look, and (with every round: `sequential` off) its re-timing."""

    workers = 1

    def __init__(self, retimed: Verdict | None) -> None:
        self.retimed = retimed

    def submit(self, problem: Problem, source: str, options: EvalOptions) -> Future[Verdict]:
        future: Future[Verdict] = Future()
        if source == problem.baseline_as_candidate:
            future.set_result(verdict("correct", 1.0, (0.95, 1.05), early=False))
        elif not options.sequential:
            assert self.retimed is not None, "this run does not re-time its best"
            future.set_result(self.retimed)
        else:
            future.set_result(verdict("faster", EARLY[0], EARLY[1], early=True))
        return future

    def shutdown(self) -> None:
        pass


class OneRewrite:
    """A provider with one rewrite, then nothing more."""

    reads_profile = False

    def __init__(self) -> None:
        self.given = False

    def propose(self, context: ProposalContext) -> ProposalBatch:
        if self.given:
            return ProposalBatch(exhausted=True)
        self.given = True
        return ProposalBatch([Proposal(REWRITE, "test", "torch.softmax")])


def optimized(tmp_path: Path, retimed: Verdict | None) -> tuple[Database, int, KernelResult]:
    """One kernel optimized by the real loop into a real SQLite file; the run stored as optimize stores it."""
    db = open_database(str(tmp_path / "runs.db"))
    run_id = create_run(db, "search", None, {})
    search = SearchConfig(proposal_rounds=1, samples=1, roofline_stop=0, retime_best=retimed is not None)
    options = LoopOptions(search=search, eval=EvalOptions(threads=1), references=ReferenceConfig(references=False))
    loop = KernelLoop(db, run_id, load_problem(SOFTMAX), OneRewrite(), options, shared=Shared(Scripted(retimed)))
    result = loop.run()
    finish_run(db, run_id, "completed", "")
    return db, run_id, result


def cli(*args: str, stdin: str | None = None) -> str:
    result = CliRunner().invoke(app, list(args), input=stdin)
    assert result.exit_code == 0, result.output
    return result.stdout


def only_labelled(text: str, view: str) -> None:
    """The early look's point and its upper end appear in `text` only labelled as the early look."""
    for match in re.finditer(r"5\.156?x|25\.63|25\.629", text):
        before = text[max(0, match.start() - 50) : match.start()]
        assert "early look" in before, f"{view}: {text[max(0, match.start() - 200) : match.end() + 50]}"


def readable(html: str) -> str:
    """The report with each chart reduced to its texts (matplotlib keeps each as a comment beside its glyphs)."""
    return re.sub(r"<svg.*?</svg>", lambda m: " | ".join(re.findall(r"<!-- (.*?) -->", m.group(0))), html, flags=re.S)


def row_of(table: str, first: str) -> str:
    return next(line for line in table.splitlines() if line.strip("│┃ ").startswith(first))


@pytest.fixture
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # rich tables: no cell cut short
    monkeypatch.setattr("kernel_agent.export.package.reverify", lambda kernel, c, options: (True, "stub"))
    monkeypatch.setattr("kernel_agent.export.package.plain_run", lambda kernel, c, options: None)


def test_every_view_quotes_the_retimed_best_and_labels_its_early_look(
    tmp_path: Path, wide: None, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id, result = optimized(tmp_path, verdict("faster", RETIMED[0], RETIMED[1], early=False))
    best, retime = result.best_candidate, result.record_candidate
    assert best is not None and retime is not None and retime != best
    at = ("--db", str(tmp_path / "runs.db"))

    # optimize: the end table (with its fast_p block) and --json
    render_summary(run_id, [result], run_detail(db, run_id)["metrics"])  # type: ignore[index]
    table = capsys.readouterr().out
    assert "1.48x" in row_of(table, "softmax64") and "1.48x" in row_of(table, "baseline")  # the geomean
    only_labelled(table, "optimize")
    document = result.to_dict()
    assert (document["speedup"], document["speedup_ci"]) == (RETIMED[0], list(RETIMED[1]))
    assert document["best_ms"] == pytest.approx(2.0 / RETIMED[0]) and document["speedup_vs"]["baseline"] == {
        "value": RETIMED[0],
        "ci": list(RETIMED[1]),
    }

    # runs show and --json (fast_p counts the number of record: 1.475 is not more than 1.5)
    assert "1.48x" in row_of(cli("runs", "show", str(run_id), *at), "softmax64")
    only_labelled(cli("runs", "show", str(run_id), *at), "runs show")
    (kernel,) = json.loads(cli("runs", "show", str(run_id), *at, "--json"))["kernels"]
    assert (kernel["speedup"], kernel["speedup_ci"], kernel["record_candidate"]) == (RETIMED[0], [1.35, 1.61], retime)
    assert kernel["best_ms"] == pytest.approx(2.0 / RETIMED[0]) and kernel["best_verified_speedup"] == RETIMED[0]
    metrics = json.loads(cli("runs", "show", str(run_id), *at, "--json"))["metrics"]
    assert metrics["fast_p"]["baseline"]["fast_1.5"] == 0.0 and metrics["geomean"]["baseline"] == RETIMED[0]

    # candidates list and --json: the best's row quotes its number of record, its early look labelled
    listed = cli("candidates", "list", "--run", str(run_id), *at)
    assert "1.48x" in row_of(listed, str(best)) and "[1.35, 1.61]" in row_of(listed, str(best))
    only_labelled(listed, "candidates list")
    rows = {c["id"]: c for c in json.loads(cli("candidates", "list", "--run", str(run_id), *at, "--json"))}
    assert (rows[best]["speedup"], rows[best]["speedup_ci"]) == (RETIMED[0], [1.35, 1.61])
    assert rows[best]["early_look"] == {"candidate": best, "speedup": EARLY[0], "speedup_ci": list(EARLY[1])}

    # the HTML report: kernels table, tile, run chart, lineage, the list of candidates
    cli("report", str(run_id), "-o", str(tmp_path / "report.html"), *at)
    html = (tmp_path / "report.html").read_text()
    kernels_table = html.split("<h2>Kernels</h2>", 1)[1].split("</table>", 1)[0]
    cells = re.findall(r'<td class="num">([^<]*)</td>', kernels_table)
    assert "1.475x" in cells and "[1.350, 1.610]" in cells, cells
    assert "<b>1.475x</b><span>best speedup</span>" in html
    run_chart = html.split("<h2>The whole run</h2>", 1)[1].split("</svg>", 1)[0]
    assert "1.48x" in run_chart and "5.16" not in run_chart
    lineage = html.split('<ol class="lineage">', 1)[1].split("</ol>", 1)[0]
    assert "1.475x [1.350, 1.610]" in lineage and "early look 5.156x [1.800, 25.629], superseded" in lineage
    (line,) = roofline_data(run_kernels(db, run_id))  # the winner's point: from the re-timing's own A/B run
    assert [p.best_gflops for p in line.points] == [pytest.approx(2.0e6 / (2.0 / RETIMED[0]) / 1e6)]
    assert '<div class="chart roofline">' in html
    for svg in re.findall(r"<svg.*?</svg>", html, flags=re.S):  # matplotlib keeps each text as a comment
        texts = re.findall(r"<!-- (.*?) -->", svg)
        assert not any("5.1" in t or "25.6" in t for t in texts), texts  # no chart labels the early look
        assert all(float(t) < 5 for t in texts if re.fullmatch(r"[\d.]+", t)), texts  # nor scales its axis to it
    only_labelled(html, "report")

    # review: the panel of the best
    panel = cli("review", str(run_id), *at, stdin="s\n")
    assert "speedup    1.475x, 95% interval [1.350, 1.610]" in panel and "early look 5.16x" in panel
    only_labelled(panel, "review")

    # export, both formats: BENCHMARKS.md, benchmarks.csv, CARD.md, metadata.json and the ops' docstrings
    shipped = cli("export", str(run_id), "--out", str(tmp_path / "pip"), "--name", "mine", *at)
    assert f"exported softmax64: candidate {best}, 1.48x" in shipped
    benchmarks = (tmp_path / "pip" / "BENCHMARKS.md").read_text()
    assert "| 1.4750x | [1.3500, 1.6100] |" in benchmarks and "5.1" not in benchmarks
    (row,) = csv.DictReader(io.StringIO((tmp_path / "pip" / "benchmarks.csv").read_text()))
    assert (row["candidate"], row["speedup"], row["ci_low"], row["ci_high"]) == (
        str(best),
        "1.4750",
        "1.3500",
        "1.6100",
    )
    cli("export", str(run_id), "--out", str(tmp_path / "hf"), "--name", "mine", "--format", "hf-kernels", *at)
    card = (tmp_path / "hf" / "CARD.md").read_text()
    assert "1.4750x [1.3500, 1.6100]" in card and "5.1" not in card
    metadata = json.loads((tmp_path / "hf" / "build" / "torch-cpu" / "metadata.json").read_text())
    (entry,) = metadata["kernel-agent"]["candidates"]["softmax64"]
    assert (entry["candidate"], entry["speedup"], entry["speedup_ci"]) == (best, RETIMED[0], list(RETIMED[1]))
    assert "softmax64: 1.48x on test cpu" in (tmp_path / "hf" / "build" / "torch-cpu" / "__init__.py").read_text()


def test_a_wide_early_look_not_yet_retimed_is_shown_as_re_timing_never_as_a_number(
    tmp_path: Path, wide: None, capsys: pytest.CaptureFixture[str]
) -> None:
    db, run_id, result = optimized(tmp_path, retimed=None)
    at = ("--db", str(tmp_path / "runs.db"))
    render_summary(run_id, [result], run_detail(db, run_id)["metrics"])  # type: ignore[index]
    views = {"optimize": capsys.readouterr().out, "optimize --json": json.dumps(result.to_dict())}
    assert "re-timing" in row_of(views["optimize"], "softmax64")
    assert (result.speedup, result.speedup_ci, result.best_ms) == (None, None, None)
    assert "--no-retime-best" in result.reason
    views["runs show"] = cli("runs", "show", str(run_id), *at)
    views["runs show --json"] = cli("runs", "show", str(run_id), *at, "--json")
    views["candidates list"] = cli("candidates", "list", "--run", str(run_id), *at)
    views["candidates list --json"] = cli("candidates", "list", "--run", str(run_id), *at, "--json")
    cli("report", str(run_id), "-o", str(tmp_path / "report.html"), *at)
    views["report"] = readable((tmp_path / "report.html").read_text())
    views["review"] = cli("review", str(run_id), *at, stdin="s\n")
    views["export"] = cli("export", str(run_id), "--out", str(tmp_path / "pip"), "--name", "mine", *at)
    views["BENCHMARKS.md"] = (tmp_path / "pip" / "BENCHMARKS.md").read_text()
    views["benchmarks.csv"] = (tmp_path / "pip" / "benchmarks.csv").read_text()
    for view, text in views.items():
        assert "5.16" not in text and "5.156" not in text and "25.6" not in text, view
    assert "re-timing" in row_of(views["runs show"], "softmax64")
    (line,) = roofline_data(run_kernels(db, run_id))  # the best's run gives the baseline point, no winner point
    assert [(p.baseline_gflops, p.best_gflops) for p in line.points] == [(pytest.approx(1.0), None)]
    (kernel,) = json.loads(views["runs show --json"])["kernels"]
    assert (kernel["speedup"], kernel["pending"], kernel["best_verified_speedup"]) == (None, "re-timing", 1.8)
    assert "re-timing" in row_of(views["candidates list"], str(result.best_candidate))
    assert "<b>re-timing</b><span>best speedup</span>" in views["report"]
    assert "speedup    re-timing" in views["review"]
    assert "| re-timing |" in views["BENCHMARKS.md"] and ",re-timing\n" in views["benchmarks.csv"]

"""Candidate text (issue 11, class E): control sequences, rich markup and invalid Unicode from a
candidate or an LLM reply are cleaned once where they enter, then shown and stored as plain text.

Real parts only: the CLI as a subprocess on the e40_* adversarial fixtures, a real SQLite file
(and PostgreSQL when KERNEL_AGENT_TEST_PG_URL is set) through the store, the real report renderer.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import typer.main
from conftest import ROOT, SOFTMAX, cli_args, run_cli
from sqlalchemy import text as sql
from test_databases import database_url  # noqa: F401 - the SQLite / PostgreSQL fixture
from typer.testing import CliRunner

from kernel_agent.cli import app
from kernel_agent.core.text import clean, has_raw_controls
from kernel_agent.core.verdict import Verdict
from kernel_agent.db import writes as store
from kernel_agent.db.reads import candidate_detail, run_detail
from kernel_agent.db.session import open_database
from kernel_agent.problem.load import load_problem
from kernel_agent.propose.base import LLMCall
from kernel_agent.propose.openai_chat import to_proposals
from kernel_agent.propose.parse import extract_candidate, summary_line
from kernel_agent.review.decisions import record
from kernel_agent.review.report import render_report

FIXTURES = ROOT / "tests" / "adversarial" / "fixtures"
E40 = sorted(FIXTURES.glob("e40_*.py"))
ESC = "\x1b"
HOSTILE = f"{ESC}[31mred{ESC}[0m {ESC}]0;title{ESC}\\ [/red] closes nothing [bold] \ud800 NUL\x00 \x9b2J bidi\u202e end"


def controls(text: str) -> list[str]:
    """Every control or format character except newline and tab: what must never reach a terminal."""
    return [repr(ch) for ch in text if ch not in "\n\t" and unicodedata.category(ch) in ("Cc", "Cf", "Cs")]


def cli_bytes(*args: str) -> subprocess.CompletedProcess[bytes]:
    """The CLI with raw bytes captured: decoding is part of what is checked."""
    return subprocess.run(
        [sys.executable, "-m", "kernel_agent", *cli_args(args)],
        cwd=ROOT,
        capture_output=True,
        timeout=600,
        env={**os.environ, "COLUMNS": "200"},
    )


# ---- the sanitizer ------------------------------------------------------------------------------


def test_clean_removes_escapes_controls_and_invalid_unicode_and_keeps_brackets() -> None:
    cleaned = clean(HOSTILE)
    assert cleaned == "red [/red] closes nothing [bold] \ufffd NUL bidi end"
    assert not controls(cleaned)
    cleaned.encode("utf-8")  # storable and printable
    assert clean("a\r\nb\tc\x00d", keep_newlines=True) == "a\nb    cd"
    assert clean("one\ntwo") == "one two"
    assert clean("x" * 50, limit=10) == "x" * 9 + "…"
    assert clean(b"bytes \xff ok") == "bytes \ufffd ok"
    assert clean(f"{ESC}]0;unterminated title with no end") == ""  # an OSC that never ends takes its payload with it


def test_has_raw_controls_refuses_what_code_cannot_hold_and_allows_escapes_as_text() -> None:
    assert (
        has_raw_controls("x = '\\x1b[31m'\n\tif x:\r\n\f    pass\n") is None
    )  # escapes written as text, tab, CRLF, form feed
    assert "U+001B" in has_raw_controls(f"x = '{ESC}[31m'\n")
    assert "U+202E" in has_raw_controls("x = 'abc\u202e'\n")  # Trojan Source bidi override
    assert "U+0000" in has_raw_controls("x = 1\x00\n")
    assert "lone surrogate" in has_raw_controls("x = '\ud800'\n")


def test_verdict_cleans_every_text_on_assignment_and_before_it_is_read() -> None:
    verdict = Verdict(
        "runtime_error",
        reason=HOSTILE,
        checks=[{"case": "c", "passed": False, "note": HOSTILE}],
        static=[{"rule": "r", "message": HOSTILE, "line": 1, "hard": False}],
    )
    verdict.candidate_output = "line one\n" + HOSTILE + "\n" * 2
    verdict.flags.append(HOSTILE)  # appended after the verdict was made, as the loop's floor check does
    data = verdict.to_dict()
    assert verdict.reason == clean(HOSTILE) and "[/red]" in verdict.reason
    assert (
        data["flags"] == [clean(HOSTILE)]
        and data["checks"][0]["note"] == clean(HOSTILE)
        and data["static"][0]["message"] == clean(HOSTILE)
    )
    assert (
        verdict.candidate_output.startswith("line one\nred ")
        and "[/red] closes nothing [bold]" in verdict.candidate_output
    )
    assert not controls(verdict.candidate_output)
    assert not controls(verdict.to_json()) and "\\u001b" not in verdict.to_json()
    long = Verdict("crashed", candidate_output="y" * 10_000)
    assert len(long.candidate_output) == 4000


# ---- the LLM reply parser ----------------------------------------------------------------------


def test_reply_whose_code_holds_a_raw_escape_is_a_parse_error_and_the_code_is_never_rewritten() -> None:
    reply = (
        f"Plan: colour {ESC}[31mthe[0m [bold]output\n```python\nimport torch\n\ndef kernel(x):\n"
        f"    print('{ESC}[2J')\n    return torch.softmax(x, -1)\n```\n"
    )
    source, reason = extract_candidate(reply, "kernel")
    assert source is None and "raw control character (U+001B)" in reason and not controls(reason)
    (proposal,) = to_proposals([reply], "kernel", "openai", 0)
    assert proposal.source is None and proposal.parse_error == reason
    assert proposal.note == summary_line(reply) and not controls(proposal.note) and "[bold]" in proposal.note
    escaped = "```python\nimport torch\n\ndef kernel(x):\n    print('\\x1b[2J')\n    return torch.softmax(x, -1)\n```\n"
    assert extract_candidate(escaped, "kernel") == (
        "import torch\n\ndef kernel(x):\n    print('\\x1b[2J')\n    return torch.softmax(x, -1)\n",
        None,
    )
    # splitlines() would have turned these into line breaks and so rewritten the code; they are refused instead
    for raw in ("\x1c", "\x0b", "\u2028\x85"):
        source, reason = extract_candidate(f"```python\ndef kernel(x):\n    return x  # {raw}\n```\n", "kernel")
        assert source is None and reason, raw
    bare = f"def kernel(x):\n    return x  # {ESC}[0m\n"
    assert extract_candidate(bare, "kernel")[0] is None


# ---- eval through the real CLI ----------------------------------------------------------------------


@pytest.mark.parametrize("fixture", E40, ids=[f.stem for f in E40])
def test_eval_prints_a_verdict_not_the_candidates_text(fixture: Path, tmp_path: Path) -> None:
    for extra in ((), ("--json",)):
        proc = cli_bytes(
            "eval", str(SOFTMAX), str(fixture), "--sandbox", str(tmp_path / "sandbox"), "--threads", "1", *extra
        )
        stdout, stderr = (
            proc.stdout.decode("utf-8"),
            proc.stderr.decode("utf-8"),
        )  # strict: valid UTF-8 or the test fails
        assert proc.returncode == 1, (
            extra,
            stdout,
            stderr[-2000:],
        )  # a verdict, not a crash (which exits 1 with a traceback)
        assert "Traceback" not in stderr and "MarkupError" not in stderr, stderr[-2000:]
        assert not controls(stdout) and not controls(stderr), (controls(stdout), controls(stderr))
        if extra:
            verdict = json.loads(stdout)
            reason = verdict["reason"]
            assert (
                verdict["status"] == "runtime_error"
                and not controls(reason)
                and not controls(verdict["candidate_output"])
            )
        else:
            assert stdout.startswith("runtime_error") and "reason:" in stdout
            reason = " ".join(stdout.split("reason:", 1)[1].split())  # rich wraps long lines; the words are what count
        if fixture.stem == "e40_rich_markup":
            assert (
                "[/red] closes nothing [bold] and [link=https://example.invalid]a link[/link] :thumbs_up: [/]" in reason
            )
        if fixture.stem == "e40_ansi_escapes":
            assert "red alert, cleared" in reason
            if extra:
                assert "call red link" in verdict["candidate_output"]
        if fixture.stem == "e40_lone_surrogate":
            assert "lone surrogate \ufffd then NUL then \ufffd end" in reason


# ---- storage and every view of it ------------------------------------------------------------------


def test_hostile_text_stores_and_reads_back_clean(database_url: str, tmp_path: Path) -> None:  # noqa: F811
    db = open_database(database_url)
    try:
        problem = load_problem(SOFTMAX)
        run_id = store.create_run(db, "openai", "scripted", {})
        problem_id = store.ensure_problem(db, problem)
        run_kernel_id = store.add_run_kernel(db, run_id, problem_id)
        common = dict(
            run_id=run_id,
            run_kernel_id=run_kernel_id,
            problem_id=problem_id,
            baseline_source=problem.baseline_source,
            parent_id=None,
            parent_source=problem.baseline_source,
            origin="openai",
            round=1,
        )
        reply = f"```python\ndef kernel(x):\n    return x  # {ESC}[0m \ud800\n```\n"
        call = LLMCall(
            prompt_hash="h" * 64,
            model="scripted",
            base_url="http://127.0.0.1:9/v1",
            request={"messages": []},
            response_texts=[reply],
        )
        call_id = store.add_llm_call(db, call, run_id, run_kernel_id, 1)
        failed = store.add_llm_call(
            db,
            LLMCall(prompt_hash="e" * 64, model="scripted", base_url="", request={}, response_texts=[], error=HOSTILE),
            run_id,
            run_kernel_id,
            1,
        )
        unparsed = store.add_candidate(
            db, source=None, note=HOSTILE, parse_error=HOSTILE, llm_call_id=call_id, **common
        )
        candidate_id = store.add_candidate(
            db, source="import torch\n\ndef kernel(x):\n    return torch.softmax(x, -1)\n", note=HOSTILE, **common
        )
        verdict = Verdict(
            "flagged",
            reason=HOSTILE,
            speedup=3.0,
            speedup_ci=[2.5, 3.5],
            correct=True,
            candidate_output=HOSTILE,
            checks=[{"case": "c", "passed": True, "note": HOSTILE}],
            problem=problem.name,
            isolation="bwrap (" + "x" * 300 + ")",
        )
        verdict.flags.append("<script>alert(1)</script> " + HOSTILE)
        store.add_evaluation(db, candidate_id, verdict, 1.0)
        store.update_run_kernel(db, run_kernel_id, status="needs_review", reason="<script>alert(1)</script> " + HOSTILE)
        store.finish_run(db, run_id, "completed")
        record(db, candidate_id, "reject", note="looked at it \ud800 [/red]", reviewer="carol\udc80")

        assert store.cached_call(db, "h" * 64).response_texts == [
            reply
        ]  # replies are kept verbatim (JSON-escaped) so replay parses the same text
        detail = candidate_detail(db, candidate_id)
        assert detail["reason"] == clean(HOSTILE) and detail["note"] == clean(HOSTILE, 2000)
        assert detail["verdict"]["flags"] == [clean("<script>alert(1)</script> " + HOSTILE)]
        assert not controls(json.dumps(detail, ensure_ascii=False))
        assert candidate_detail(db, unparsed)["reason"] == clean(HOSTILE)
        kernel = run_detail(db, run_id)["kernels"][0]
        assert kernel["reason"] == clean("<script>alert(1)</script> " + HOSTILE) and kernel["status"] == "needs_review"
        with db.engine.connect() as connection:
            (error,) = connection.execute(sql(f"select error from llm_calls where id = {failed}")).one()
            (reviewer, note) = connection.execute(sql("select reviewer, note from reviews")).one()
            (isolation,) = connection.execute(sql("select isolation from evaluations")).one()
        assert len(isolation) == 200 and isolation.endswith(
            "…"
        )  # cut to the column (PostgreSQL refuses longer); the verdict JSON keeps it all
        assert detail["verdict"]["isolation"] == "bwrap (" + "x" * 300 + ")"
        assert error == clean(HOSTILE) and reviewer == "carol\ufffd" and note == "looked at it \ufffd [/red]"

        # the database's own guard, below every cleaning: a raw lone surrogate or NUL is written as U+FFFD, not raised
        store.update_run_kernel(db, run_kernel_id, status="odd\ud800\x00")
        assert run_detail(db, run_id)["kernels"][0]["status"] == "odd\ufffd\ufffd"
        store.update_run_kernel(db, run_kernel_id, status="needs_review")

        html = render_report(db, run_id)  # jinja2 autoescape: candidate text is text in the page, never markup
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
        assert "[/red] closes nothing [bold]" in html and ESC not in html and "\ufffd" in html
    finally:
        db.close()
    if database_url.startswith("sqlite:///"):
        path = database_url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as connection:
            assert connection.execute("select count(*) from evaluations").fetchone() == (1,)
        for args in (
            ("runs", "show", str(run_id)),
            ("candidates", "show", str(candidate_id)),
            ("candidates", "list"),
            ("runs", "list"),
        ):
            proc = cli_bytes(*args, "--db", path)
            out = proc.stdout.decode("utf-8")
            assert proc.returncode == 0 and not controls(out), (args, proc.stderr.decode()[-2000:])
            if args[0] == "candidates" and args[1] == "show":
                assert "[/red] closes nothing [bold]" in " ".join(out.split())
        shown = subprocess.run(
            [sys.executable, "-m", "kernel_agent", "review", str(run_id), "--db", path],
            cwd=ROOT,
            input=b"s\n",
            capture_output=True,
            timeout=300,
            env={**os.environ, "COLUMNS": "200"},
        )
        out = shown.stdout.decode("utf-8")
        assert shown.returncode == 0, shown.stderr.decode()[-2000:]
        assert "[/red] closes nothing [bold]" in out and not controls(out) and "candidate" in out


# ---- help texts --------------------------------------------------------------------------------


def _commands(command, path: tuple[str, ...] = ()):  # noqa: ANN001 - click commands
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def test_every_help_text_prints_its_brackets() -> None:
    """Rich markup used to swallow `[cluster]`, `[[kernel]]` and the `--prices` example."""
    runner = CliRunner()
    seen = set()
    for path, command in _commands(typer.main.get_command(app)):
        result = runner.invoke(app, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, (path, result.output)
        shown = " ".join(result.output.split())
        texts = [command.help or ""] + [getattr(p, "help", None) or "" for p in command.params]
        for text in texts:
            if "[" in text:
                assert " ".join(text.split()) in shown, (path, text)
                seen.add(text)
    assert any("'kernel-agent[cluster]'" in t for t in seen) and any("[[kernel]]" in t for t in seen)
    assert any('[prices] "model" = [usd_per_1M_in, usd_per_1M_out]' in t for t in seen)
    proc = run_cli("optimize", "--help", env={"COLUMNS": "200"})  # the installed entry point, as a user runs it
    shown = " ".join(proc.stdout.split())
    assert (
        proc.returncode == 0
        and "pip install 'kernel-agent[cluster]'" in shown
        and "TOML manifest: [[kernel]] tables" in shown
    )
    assert '[prices] "model" = [usd_per_1M_in, usd_per_1M_out]' in shown

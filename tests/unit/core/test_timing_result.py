"""The timing record is typed to the bottom, and every stored verdict reads back to it and writes out the same bytes.

The golden verdicts under tests/fixtures/verdicts are real `kernel-agent eval --json` verdicts (their `speedup_vs`
left out: eval adds it beside the verdict), written by the code before the record was typed; the legacy database
holds verdicts of 5dcc3dc, whose timing lacks keys the writer adds now and holds one it no longer writes. Stored
JSON is compared as the database writes it: `json.dumps` with its default options (SQLAlchemy's JSON type).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sqlite3
import typing
from pathlib import Path
from types import UnionType

import pytest
from conftest import FIXTURES, timing_record

from kernel_agent.core.record_json import JsonRecord, Kept
from kernel_agent.core.timing_result import Resolution, TimingResult, timing_of
from kernel_agent.core.verdict import Verdict

GOLDEN = sorted((FIXTURES / "verdicts").glob("*.json"))
LEGACY = sorted((FIXTURES / "legacy").glob("*.db"))


def stored_verdicts(database: Path) -> list[str]:
    with sqlite3.connect(database) as connection:
        return [text for (text,) in connection.execute("SELECT verdict FROM evaluations")]


def test_there_are_golden_verdicts_with_every_kind_of_timing() -> None:
    timings = [json.loads(path.read_text())["timing"] for path in GOLDEN]
    assert len(timings) >= 4 and all(timings)
    assert any(t.get("processes", {}).get("second_look_of") for t in timings)  # a second look's set-aside reading
    assert any("processes" not in t for t in timings)  # one pair
    assert {json.loads(path.read_text())["status"] for path in GOLDEN} >= {"correct", "flagged"}


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_a_golden_verdict_reads_back_typed_and_writes_out_byte_identical(path: Path) -> None:
    text = path.read_text().strip()
    verdict = Verdict.from_dict(json.loads(text))
    assert isinstance(verdict.timing, TimingResult) and verdict.timing.layout is None  # this writer's own layout
    assert verdict.timing.resolution is not None
    assert bool(verdict.timing.resolution.speed_class) is (verdict.status != "flagged")  # flagged: a human decides
    assert json.dumps(verdict.to_dict()) == text


@pytest.mark.parametrize("database", LEGACY, ids=lambda p: p.stem)
def test_a_legacy_database_s_timings_read_back_and_write_out_byte_identical(database: Path) -> None:
    texts = stored_verdicts(database)
    timed = 0
    for text in texts:
        data = json.loads(text)
        assert json.dumps(data) == text  # stored as the writer writes: the comparison below is of bytes
        timing = timing_of(data)
        if timing is None:
            continue
        timed += 1
        assert timing.layout is not None and [k.key for k in timing.kept] == ["unexplained_ms_per_block"]
        assert timing.ci_level == "95%" and timing.stopping is None and timing.per_shape[0].speedup_ci is None
        assert json.dumps({**data, "timing": timing.to_json()}) == text
        assert Verdict.from_dict(data).timing == timing
    assert timed >= 2


def test_a_fresh_record_round_trips_and_an_older_one_keeps_what_it_lacked_out() -> None:
    record = timing_record()
    again = TimingResult.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record and again.layout is None and again.kept == ()
    old = record.to_json()
    del old["ci_level"], old["stopping"]
    old = {"rounds_done": 7, **old}  # a key this version does not read, first
    read = TimingResult.from_json(old)
    assert read.ci_level == "95%" and read.stopping is None  # what its readers assumed for it
    assert json.dumps(read.to_json()) == json.dumps(old)


def test_an_infinite_half_width_is_stored_as_null_and_read_back_infinite() -> None:
    said = Resolution(target=0.03, half_width=math.inf, mde=math.nan, ended_by="rounds", budget_s=8.0)
    stored = timing_record(resolution=said).to_json()
    assert stored["resolution"]["half_width"] is None and stored["resolution"]["mde"] is None
    read = TimingResult.from_json(stored).resolution
    assert read is not None and read.half_width == math.inf and read.mde == math.inf


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda t: t.pop("speedup"), "no 'speedup'"),
        (lambda t: t.update(rounds="10"), "rounds has the wrong type"),
        (lambda t: t.update(rounds=10.5), "rounds has the wrong type"),
        (lambda t: t.update(speedup_ci=[1.0]), "does not hold 2 values"),
        (lambda t: t.update(per_shape={}), "per_shape is not a list"),
        (lambda t: t["baseline"].update(median_ms=None), "median_ms has the wrong type"),
    ],
)
def test_a_stored_timing_of_the_wrong_shape_is_refused_with_a_reason(change, words: str) -> None:
    stored = timing_record().to_json()
    change(stored)
    with pytest.raises(ValueError, match=words):
        TimingResult.from_json(stored)
    with pytest.raises(TypeError, match="verdict field 'timing'"):
        Verdict.from_dict({"status": "correct", "timing": stored})


@dataclasses.dataclass
class Inner:
    rows: list[dict[str, float]]


@dataclasses.dataclass
class Outer:
    inner: Inner | None


def dict_typed(kind: type, path: str = "TimingResult") -> list[str]:
    """Every field under `kind`, records within records, whose type is or holds a dict (or Any)."""
    found = []
    hints = typing.get_type_hints(kind)
    for f in dataclasses.fields(kind):
        stack = [hints[f.name]]
        while stack:
            hint = stack.pop()
            origin = typing.get_origin(hint)
            if hint is typing.Any or hint is dict or origin is dict:
                found.append(f"{path}.{f.name}: {hint}")
            elif origin in (typing.Union, UnionType, list, tuple):
                stack += [a for a in typing.get_args(hint) if a is not Ellipsis]
            elif dataclasses.is_dataclass(hint):
                found += dict_typed(hint, f"{path}.{f.name}")
    return found


def test_no_field_of_the_timing_record_or_any_record_it_holds_is_a_dict() -> None:
    assert dict_typed(TimingResult) == []
    assert dict_typed(Outer) == ["TimingResult.inner.rows: dict[str, float]"]  # the walk finds one
    assert {t for t in records_under(TimingResult) if not issubclass(t, JsonRecord)} == {Kept}  # the codec's own


def records_under(kind: type) -> set[type]:
    seen = {kind}
    for hint in typing.get_type_hints(kind).values():
        stack = [hint]
        while stack:
            h = stack.pop()
            stack += [a for a in typing.get_args(h) if a is not Ellipsis]
            if dataclasses.is_dataclass(h) and h not in seen:
                seen |= records_under(h)
    return seen

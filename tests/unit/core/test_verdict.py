"""A verdict round trips through its JSON exactly, and a stored one is decoded strictly."""

from __future__ import annotations

import json

import pytest
from conftest import timing_record

from kernel_agent.core.verdict import STATUSES, Verdict


def full_verdict() -> Verdict:
    return Verdict(
        status="faster",
        reason="1.9x",
        correct=True,
        speedup=1.9,
        speedup_ci=[1.7, 2.1],
        problem="softmax64",
        backend="torch",
        device="cpu",
        isolation="bubblewrap",
        flags=["host clock"],
        checks=[{"case": "shape=[3, 17]", "passed": True}],
        timing=timing_record(1.9, (1.7, 2.1)),
        static=[{"rule": "r", "hard": False}],
        tolerances={"float32": [1e-4, 1e-4]},
        environment={"torch": "2.x"},
        durations={"timing": 1.5, "checks": 2},
        candidate_output="line\nline",
        profile={"calls": 3},
        roofline={"shapes": []},
        accounting={"candidate": {"timing": 0.5}},
    )


def test_every_field_round_trips_through_json() -> None:
    verdict = full_verdict()
    again = Verdict.from_dict(json.loads(verdict.to_json()))
    assert again == verdict and again.to_dict() == verdict.to_dict()
    assert set(verdict.to_dict()) == set(Verdict.__dataclass_fields__)  # nothing dropped on the way out


def test_the_timing_is_typed_and_written_as_its_record_s_json() -> None:
    verdict = full_verdict()
    stored = verdict.to_dict()
    assert stored["timing"] == verdict.timing.to_json() and stored["timing"]["per_shape"][0]["shape"] == [256, 2048]
    again = Verdict.from_dict(stored)
    assert again.timing == verdict.timing and again.timing.per_shape[0].shape == (256, 2048)


def test_passing_statuses() -> None:
    assert [s for s in STATUSES if Verdict(s).passed] == ["faster", "correct", "flagged"]
    with pytest.raises(ValueError, match="unknown verdict status"):
        Verdict("fastest")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("correct", "yes"),
        ("speedup", True),  # a bool is not a number
        ("speedup", "2.0"),
        ("speedup_ci", [1.0, 2.0, 3.0]),
        ("speedup_ci", [1.0, None]),
        ("flags", "one flag"),
        ("flags", [1]),
        ("checks", [["case", True]]),
        ("static", {"rule": "r"}),
        ("timing", []),
        ("timing", {"speedup": 1.9}),  # a timing record without its other fields
        ("durations", {"timing": "1.5"}),
        ("interpreted", 1),
        ("reason", None),
        ("roofline", "none"),
    ],
)
def test_a_stored_field_of_the_wrong_type_is_refused(field: str, value: object) -> None:
    data = full_verdict().to_dict()
    data[field] = value
    with pytest.raises(TypeError, match=repr(field)):
        Verdict.from_dict(data)


def test_unknown_fields_a_missing_status_and_non_objects_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown verdict field.*injected"):
        Verdict.from_dict({**full_verdict().to_dict(), "injected": 1})
    with pytest.raises(ValueError, match="no status"):
        Verdict.from_dict({"reason": "x"})
    with pytest.raises(ValueError, match="unknown verdict status"):
        Verdict.from_dict({"status": "faster!"})
    with pytest.raises(ValueError, match="JSON object"):
        Verdict.from_dict(["faster"])  # type: ignore[arg-type]


def test_a_stored_verdict_is_cleaned_as_it_is_decoded() -> None:
    """A database row written by a tampered process must not carry escapes to whoever reads it."""
    data = {
        "status": "incorrect",
        "reason": "bad\x1b[2J\nvalue",
        "flags": ["\x1b]0;title\x07flag"],
        "checks": [{"note": "a\x00b"}],
    }
    verdict = Verdict.from_dict(data)
    assert verdict.reason == "bad value" and verdict.flags == ["flag"] and verdict.checks == [{"note": "a b"}]
    timing = timing_record().to_json() | {"ci_level": "95%\x1b[2J", "confirmation": "x\x1b]0;t\x07y"}
    typed = Verdict.from_dict({"status": "correct", "timing": timing}).timing
    assert typed.ci_level == "95%" and typed.confirmation == "xy"


def test_text_assigned_later_and_items_appended_later_are_cleaned_too() -> None:
    verdict = Verdict("correct")
    verdict.reason = "r" * 5000
    verdict.flags.append("\x1b[31mlate flag")
    assert len(verdict.reason) == 1000
    assert verdict.to_dict()["flags"] == ["late flag"]


def test_a_verdict_s_correct_field_always_follows_its_status() -> None:
    """Issue 31, defect 4: an audit failing after the checks passed left `status: incorrect` beside
    `correct: true`."""
    from kernel_agent.core.verdict import Verdict

    verdict = Verdict(status="rejected")
    verdict.correct = True  # the checks passed
    assert verdict.correct is False  # ...but the status is not a passing one
    verdict.status = "faster"
    assert verdict.correct is True
    verdict.status = "incorrect"  # an audited timed call failed afterwards
    assert verdict.correct is False
    assert Verdict(status="incorrect", correct=True).correct is False
    assert Verdict.from_dict({"status": "correct", "correct": False}).correct is True

"""The number of record (core/of_record.py): which reading every view quotes for a candidate."""

from __future__ import annotations

import pytest

from kernel_agent.core.of_record import PENDING, Reading, of_record, relative


def early(speedup: float = 5.156, ci: tuple[float, float] = (1.8, 25.629), candidate: int = 3) -> Reading:
    return Reading(candidate, "faster", speedup, ci, 2.0, 2.0 / speedup, early=True)


def full(speedup: float, ci: tuple[float, float], status: str = "faster", candidate: int = 9) -> Reading:
    return Reading(candidate, status, speedup, ci, 2.2, 2.2 / speedup)


def test_a_faster_retime_supersedes_the_early_look_which_stays_labelled() -> None:
    number = of_record(early(), [full(1.475, (1.35, 1.61))], best=True)
    assert (number.candidate, number.speedup, number.ci, number.quoted.candidate_ms) == (  # type: ignore[union-attr]
        9,
        1.475,
        (1.35, 1.61),
        2.2 / 1.475,
    )
    assert number.early_look == early() and number.cell() == "1.48x" and number.lower_bound == 1.475
    assert number.to_json() == {
        "record_candidate": 9,
        "speedup": 1.475,
        "speedup_ci": [1.35, 1.61],
        "early_look": {"candidate": 3, "speedup": 5.156, "speedup_ci": [1.8, 25.629]},
        "pending": None,
    }
    assert number.note() == (
        "re-timed with all rounds (candidate 9): 1.48x [1.35, 1.61], faster; "
        "the early look read 5.16x [1.80, 25.63], faster"
    )


def test_a_retime_that_is_not_faster_leaves_the_early_look_even_a_wide_one() -> None:
    number = of_record(early(), [full(1.01, (0.97, 1.05), "correct")], best=True)
    assert (number.candidate, number.speedup, number.early_look, number.withheld) == (3, 5.156, None, False)
    assert number.note().endswith("1.01x [0.97, 1.05], correct; the early look stands")


def test_the_newest_retime_decides() -> None:
    newer = full(1.6, (1.5, 1.7), candidate=12)
    number = of_record(early(), [newer, full(1.01, (0.97, 1.05), "correct", candidate=9)], best=True)
    assert number.candidate == 12


@pytest.mark.parametrize(
    ("reading", "best", "withheld"),
    [
        (early(), True, True),  # 25.6 > 3 x 1.8: waits for its re-timing
        (early(), False, False),  # not the best: never re-timed, its own reading is all there is
        (early(ci=(1.8, 5.4)), True, False),  # exactly 3x: quoted
        (Reading(3, "faster", 5.156, (1.8, 25.629)), True, False),  # every round: no early look to wait on
        (Reading(3, "flagged", 5.156, (1.8, 25.629), early=True), True, False),  # flagged: a human decides
    ],
)
def test_only_a_best_accepted_by_a_wide_early_look_is_withheld(reading: Reading, best: bool, withheld: bool) -> None:
    number = of_record(reading, [], best=best)
    assert number.withheld is withheld
    if withheld:
        assert (number.speedup, number.ci, number.quoted, number.cell()) == (None, None, None, PENDING)
        assert number.lower_bound == 1.8  # what fast_p counts until the re-timing is in
        assert relative(number).reason == PENDING and "5.1" not in number.note()
        assert number.to_json()["pending"] == PENDING and number.to_json()["early_look"] is None
    else:
        assert number.speedup == 5.156 and number.candidate == 3

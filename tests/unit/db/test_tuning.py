"""The tuning times table on a real SQLite file: one row per (shape, config, stage), read back as records,
and the per-shape config table an exporter reads."""

from __future__ import annotations

from pathlib import Path

from kernel_agent.core.tuning import TIMED, ConfigTime, Stage, TunedConfig
from kernel_agent.db.session import open_database
from kernel_agent.db.tuning import TuningStore, VariantKey, stored_times, tuned_variants
from kernel_agent.select.table import tuned_configs

KEY = VariantKey("mm", "p" * 64, "v" * 64, "cpu | torch x | 1 threads", "float32")


def row(shape, tile, ms, stage=Stage.SCREEN, status=TIMED) -> ConfigTime:  # noqa: ANN001
    timed = status == TIMED
    return ConfigTime(
        shape,
        "float32",
        {"TILE": tile},
        stage,
        status,
        ms if timed else None,
        (ms * 0.9, ms * 1.1) if timed else None,
        reason="" if timed else "wrong",
    )


def test_rows_are_stored_once_and_read_back(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "runs.db"))
    store = TuningStore(db, KEY)
    rows = [row((8, 8), 4, 1.0), row((8, 8), 16, 2.0), row((64, 64), 4, None, status="incorrect")]
    store.put(rows)
    store.put(rows[:1])  # a resumed tune writing the same row again
    assert stored_times(db, KEY) == rows
    other = VariantKey(KEY.problem, KEY.problem_hash, "w" * 64, KEY.fingerprint, KEY.dtype)
    assert stored_times(db, other) == []
    assert tuned_variants(db, KEY.problem_hash) == [KEY]


def test_the_config_table_keeps_each_shapes_fastest_confirmed_config(tmp_path: Path) -> None:
    db = open_database(str(tmp_path / "runs.db"))
    TuningStore(db, KEY).put(
        [
            row((8, 8), 4, 1.0),
            row((8, 8), 16, 1.5),
            row((8, 8), 4, 2.0, Stage.CONFIRM),  # confirmed slower than its screen said
            row((8, 8), 16, 1.2, Stage.CONFIRM),
            row((64, 64), 4, 3.0),
        ]
    )
    table = tuned_configs(db, KEY, ("M", "N"))
    assert table == [
        TunedConfig({"M": 8, "N": 8}, {"TILE": 16}, 1.2),
        TunedConfig({"M": 64, "N": 64}, {"TILE": 4}, 3.0),
    ]

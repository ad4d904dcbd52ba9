"""A learned ranker (LightGBM's lambdarank, the optional extra `kernel-agent[select]`) over shape, config and
device features, trained on the stored ground truth of the training shapes only; Composable Kernel's
dispatcher ranks its configs the same way.

Features per (shape, config): log2 of each dimension, each tunable's value, and for every (dimension,
numeric tunable) pair the log ratio and the quantization efficiency dim / (ceil(dim / v) * v); the device's
unit count. Labels grade each config by its efficiency on its shape (best time / its time), 0 for a failure.
"""

from __future__ import annotations

import math
import zlib

from kernel_agent.core.tuning import Shape, parse_config
from kernel_agent.select.base import Selector

LABEL_LEVELS = 30  # lambdarank's default label gains cover 0..30


def available() -> bool:
    try:
        import lightgbm  # noqa: F401
    except ImportError:
        return False
    return True


class Ranker(Selector):
    name = "lightgbm"

    def fit(self, train, context) -> None:  # noqa: ANN001 - see Selector.fit
        import lightgbm
        import numpy as np

        super().fit(train, context)
        features, labels, groups = [], [], []
        for shape in train.shapes:
            if not train.times.get(shape):
                continue
            best = train.best_ms(shape)
            for key in train.pool:
                ms = train.time_of(shape, key)
                features.append(self.features(shape, key))
                labels.append(0 if ms is None else int(round(LABEL_LEVELS * (best / ms) ** 3)))
            groups.append(len(train.pool))
        params = {
            "objective": "lambdarank",
            "learning_rate": 0.05,
            "num_leaves": 15,
            "min_data_in_leaf": 3,
            "min_data_in_bin": 1,
            "verbose": -1,
            "seed": 0,
            "deterministic": True,
            "num_threads": 1,
        }
        binning = {"min_data_in_bin": 1, "feature_pre_filter": False, "verbose": -1}
        data = lightgbm.Dataset(np.asarray(features), np.asarray(labels), group=groups, params=binning)
        self.model = lightgbm.train(params, data, num_boost_round=200)  # the core API: no scikit-learn needed

    def features(self, shape: Shape, key: str) -> list[float]:
        config = parse_config(key)
        values = [_number(config[name]) for name in sorted(config)]
        row = [math.log2(d) for d in shape] + values + [float(self.context.device.units)]
        for dim in shape:
            for value in values:
                if value > 0:
                    ratio = math.log2(dim / value)
                    row += [ratio, abs(ratio), dim / (math.ceil(dim / value) * value)]
                else:  # a switch (ORDER=0), not a size: no ratio, but the same number of features
                    row += [0.0, 0.0, 1.0]
        return row

    def rank(self, shape: Shape) -> list[tuple[str, float]]:
        import numpy as np

        scores = self.model.predict(np.asarray([self.features(shape, key) for key in self.train.pool]))
        # A cost, lower is better: the negated score, so that the base confidence reads a margin of scores.
        return sorted(((key, -float(s)) for key, s in zip(self.train.pool, scores)), key=lambda item: item[1])

    def confidence(self, shape: Shape, ranking: list[tuple[str, float]]) -> float:
        if len(ranking) < 2:
            return 1.0
        return min(1.0, max(0.0, ranking[1][1] - ranking[0][1]) / 0.5)  # score gap of the top two


def _number(value: object) -> float:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return float(zlib.crc32(str(value).encode()) % 1000)  # a string tunable as a stable category code

"""JSON every reader can parse, whatever the numbers: non-finite floats written as strings.

Python's `json` writes inf and nan as the bare words `Infinity` and `NaN`, which are not JSON: `jq`,
JavaScript's `JSON.parse` and strict parsers refuse the whole document. A verdict can hold them honestly
(a relative error over an all-zero gold), so the CLI writes them as "inf", "-inf" and "nan", which
`float()` reads back (`number`).
"""

from __future__ import annotations

import json
import math
from typing import Any

NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def encodable(value: Any) -> Any:
    """`value` with every non-finite float (in dicts, lists and tuples, at any depth) as its string."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {key: encodable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encodable(item) for item in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` that never writes `Infinity` or `NaN` (it raises rather than emit one)."""
    return json.dumps(encodable(value), allow_nan=False, **options)


def number(value: Any) -> float | None:
    """A number as `dumps` wrote it: a JSON number, one of the non-finite strings, or None."""
    if isinstance(value, str):
        return NONFINITE.get(value)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None

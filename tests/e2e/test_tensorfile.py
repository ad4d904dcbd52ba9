"""The tensor file decoder under fuzzing: any bytes, any JSON header, only ever a clean error.

Thousands of hypothesis examples (tens of seconds), so not in the inner loop; the codec's
deterministic tests are tests/unit/core/test_tensorfile.py."""

from __future__ import annotations

import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kernel_agent.core import tensorfile


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=512))
def test_random_bytes_never_raise_anything_but_a_clean_error(blob: bytes) -> None:
    try:
        tensorfile.decode(tensorfile.MAGIC + blob)
    except tensorfile.TensorFileError:
        pass


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=1000, deadline=None)
@given(JSON_VALUES)
def test_random_json_headers_are_refused_cleanly(header_value: object) -> None:
    header = json.dumps({"tensors": [header_value], "meta": {}}).encode()
    blob = tensorfile.MAGIC + struct.pack("<Q", len(header)) + header + b"\0" * 64
    try:
        tensorfile.decode(blob)
    except tensorfile.TensorFileError:
        pass

"""The worker protocol's records: the exact lines the trusted side writes, and the worker's reading of them
(every request back as itself; anything else refused with a one-line reason)."""

from __future__ import annotations

import json
import math
from dataclasses import fields

import pytest

from kernel_agent.sandbox.channel import send
from kernel_agent.sandbox.protocol import (
    ADMITS,
    REQUESTS,
    Call,
    Check,
    Describe,
    Exit,
    Load,
    Ping,
    Profile,
    ProtocolError,
    Request,
    Stage,
    Warmup,
    WorkerFds,
    parse,
)

LAYOUT = {"layout": [["float32", [4, 8], 0], ["int64", [], 128]]}
STATE = {"names": ["weight"], "layout": [["float32", [3], 0]], "init_args": [3, 0.5]}

# Each request as the channel writes it: these bytes are the wire the worker and the adversarial fixtures
# that impersonate it read, so any change here is a protocol change.
WIRE = [
    (Load(), '{"cmd":"load"}'),
    (Load(STATE), '{"cmd":"load","state":{"names":["weight"],"layout":[["float32",[3],0]],"init_args":[3,0.5]}}'),
    (
        Check(4096, -7.0e37, LAYOUT),
        '{"cmd":"check","poison_bytes":4096,"poison_value":-7e+37,"layout":[["float32",[4,8],0],["int64",[],128]]}',
    ),
    (
        Warmup(3, 0.03, 45.0, LAYOUT),
        '{"cmd":"warmup","min_calls":3,"min_seconds":0.03,"max_seconds":45.0,'
        '"layout":[["float32",[4,8],0],["int64",[],128]]}',
    ),
    (Stage("0", [[["float32", [4], 0]]]), '{"cmd":"stage","key":"0","calls":[[["float32",[4],0]]]}'),
    (Stage("1", [], [{"h": 1}]), '{"cmd":"stage","key":"1","calls":[],"handles":[{"h":1}]}'),
    (Call("0"), '{"cmd":"call","key":"0"}'),
    (Describe(True), '{"cmd":"describe","integrity":true}'),
    (Ping(), '{"cmd":"ping"}'),
    (Profile(3, LAYOUT), '{"cmd":"profile","calls":3,"layout":[["float32",[4,8],0],["int64",[],128]]}'),
    (Exit(), '{"cmd":"exit"}'),
]


def written(request: Request) -> str:
    """The line `channel.send` writes for `request` (through a real pipe)."""
    import os

    read, write = os.pipe()
    try:
        send(write, request.to_wire())
        return os.read(read, 1 << 16).decode().removesuffix("\n")
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.parametrize(("request_", "line"), WIRE, ids=[type(r).__name__ + str(i) for i, (r, _) in enumerate(WIRE)])
def test_each_request_is_written_as_before_and_read_back_as_itself(request_: Request, line: str) -> None:
    assert written(request_) == line
    assert parse(json.loads(line)) == request_


def test_every_request_has_a_wire_case_and_every_field_a_reading() -> None:
    assert {type(r) for r, _ in WIRE} == set(REQUESTS.values())
    for cls in REQUESTS.values():
        for f in fields(cls):
            assert f.name == "placed" or str(f.type) in ADMITS, f"{cls.__name__}.{f.name}: {f.type}"


def test_a_nan_poison_survives_the_wire() -> None:
    assert math.isnan(parse(json.loads(written(Check(8, math.nan, LAYOUT)))).poison_value)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ([1, 2], "unknown request"),
        ({"key": "0"}, "unknown request"),
        ({"cmd": "frobnicate"}, "unknown request"),
        ({"cmd": 7}, "unknown request"),
        ({"cmd": ["check"]}, "unknown request"),
        ({"cmd": "check", "poison_bytes": 8, "poison_value": 0.0}, "check: no layout of its inputs"),
        ({"cmd": "warmup", "layout": "0:64"}, "warmup: no layout of its inputs"),
        ({"cmd": "check", "poison_bytes": "8", "layout": []}, "check: poison_bytes is not int"),
        ({"cmd": "warmup", "min_calls": True, "layout": []}, "warmup: min_calls is not int"),
        ({"cmd": "warmup", "min_seconds": None, "layout": []}, "warmup: min_seconds is not float"),
        ({"cmd": "call", "key": 0}, "call: key is not str"),
        ({"cmd": "stage", "key": "0", "calls": {}}, "stage: calls is not list[Any]"),
        ({"cmd": "describe", "integrity": 1}, "describe: integrity is not bool"),
        ({"cmd": "load", "state": []}, "load: state is not dict[str, Any] | None"),
    ],
)
def test_anything_else_is_refused_with_a_one_line_reason(message: object, reason: str) -> None:
    with pytest.raises(ProtocolError) as refused:
        parse(message)
    assert reason in str(refused.value)
    assert "\n" not in str(refused.value)


def test_unknown_fields_are_ignored_and_missing_ones_take_the_declared_default() -> None:
    assert parse({"cmd": "ping", "extra": [1]}) == Ping()
    assert parse({"cmd": "warmup", "layout": []}) == Warmup(placed={"layout": []})


def test_the_descriptors_cross_the_command_line_and_back() -> None:
    fds = WorkerFds(7, 9, 11)
    assert fds.arg() == "7,9,11,-1"
    assert WorkerFds.parse(fds.arg()) == fds
    assert fds.passed() == (7, 9, 11)

"""`Devices` (core/config.py): the run's `--device` list, parsed once for the command line and the stored plan."""

from __future__ import annotations

import pytest

from kernel_agent.core.config import Device, Devices, from_json, to_json


@pytest.mark.parametrize(
    ("text", "devices"),
    [
        ("auto", (Device.AUTO,)),
        ("cpu", (Device.CPU,)),
        ("cuda", (Device.CUDA,)),
        ("cpu,cuda", (Device.CPU, Device.CUDA)),
        ("cuda, cpu", (Device.CUDA, Device.CPU)),  # the order listed is the order run
        (["cpu", "cuda"], (Device.CPU, Device.CUDA)),  # as a stored plan holds it
    ],
)
def test_a_device_list_parses_in_the_order_written(text: object, devices: tuple[Device, ...]) -> None:
    parsed = Devices.parse(text)
    assert isinstance(parsed, Devices) and tuple(parsed) == devices
    assert all(type(d) is Device for d in parsed)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("gpu", "must be auto, cpu, cuda or a comma-separated list of cpu and cuda (cpu,cuda), not 'gpu'"),
        ("cpu,tpu", "not 'cpu,tpu'"),
        ("cpu,", "not 'cpu,'"),
        ("", "not ''"),
        ("CPU", "not 'CPU'"),
        ("auto,cuda", "auto stands alone"),
        ("cpu,cuda,cpu", "names cpu twice in 'cpu,cuda,cpu'; list each device once"),
        ([], "not an empty list"),
    ],
)
def test_a_bad_device_list_is_one_line_naming_what_is_accepted(text: object, message: str) -> None:
    with pytest.raises(ValueError) as caught:
        Devices.parse(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_devices_store_as_a_list_of_names_and_come_back_typed() -> None:
    stored = to_json(Devices.parse("cpu,cuda"))
    assert stored == ["cpu", "cuda"]
    assert str(Devices.parse(stored)) == "cpu,cuda" and Devices() == Devices.parse("auto")

    from dataclasses import dataclass, field

    @dataclass
    class Holder:
        devices: Devices = field(default_factory=Devices)

    again = from_json(Holder, to_json(Holder(Devices.parse("cuda,cpu"))))
    assert isinstance(again.devices, Devices) and tuple(again.devices) == (Device.CUDA, Device.CPU)

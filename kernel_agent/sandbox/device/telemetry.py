"""The device's clocks, power and temperature at each timed block's ends (DESIGN.md section 18), from NVML where
`pynvml` imports, else torch.cuda's own readers where they answer; and the rule that flags throttling."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

THROTTLE_DROP = 0.10  # an SM clock this far under the block's first reading is a slowdown both sides may not share
# NVML clocks-event reasons (nvmlClocksEventReasons): flagged ones change speed mid-measurement for reasons
# outside the kernels; a software power cap is recorded only (common under load, slows both sides alike).
FLAGGED = {0x8: "hardware slowdown", 0x20: "software thermal slowdown", 0x40: "hardware thermal slowdown"}
FLAGGED |= {0x80: "power brake"}
RECORDED = {0x4: "software power cap", 0x1: "idle"}


@dataclass(frozen=True)
class DeviceState:
    sm_mhz: float | None
    memory_mhz: float | None
    power_w: float | None
    temperature_c: float | None
    reasons: int | None  # the NVML clocks-event bitmask (None without NVML)
    source: str  # "nvml", "torch" or "none"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def read_state(index: int = 0) -> DeviceState:
    """One reading; never raises (a missing reader is recorded as such)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        return DeviceState(
            float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
            float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM)),
            pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
            float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
            int(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)),
            "nvml",
        )
    except Exception:  # noqa: BLE001 - no pynvml, no driver, or a call this driver lacks
        pass
    try:
        import torch

        return DeviceState(
            float(torch.cuda.clock_rate(index)),
            None,
            torch.cuda.power_draw(index) / 1000.0,
            float(torch.cuda.temperature(index)),
            None,
            "torch",
        )
    except Exception:  # noqa: BLE001 - torch's readers need pynvml or amdsmi too
        return DeviceState(None, None, None, None, None, "none")


def throttled(states: list[DeviceState]) -> str | None:
    """The flag's reason when the device slowed during a block for reasons outside the kernels, or None."""
    named = sorted({name for s in states if s.reasons for bit, name in FLAGGED.items() if s.reasons & bit})
    if named:
        return f"the device throttled during timing ({', '.join(named)})"
    clocks = [s.sm_mhz for s in states if s.sm_mhz]
    if len(clocks) >= 2 and min(clocks[1:]) < (1 - THROTTLE_DROP) * clocks[0]:
        return f"the device's SM clock fell from {clocks[0]:.0f} to {min(clocks[1:]):.0f} MHz during timing"
    return None


def recorded(states: list[DeviceState]) -> str:
    """One line for the verdict: the readings' range and any recorded-only reasons."""
    real = [s for s in states if s.source != "none"]
    if not real:
        return "device clocks not read (no NVML and no torch reader)"
    sm = [s.sm_mhz for s in real if s.sm_mhz]
    temp = [s.temperature_c for s in real if s.temperature_c is not None]
    power = [s.power_w for s in real if s.power_w is not None]
    notes = sorted({name for s in real if s.reasons for bit, name in RECORDED.items() if s.reasons & bit})
    parts = [f"SM {min(sm):.0f}-{max(sm):.0f} MHz" if sm else "", f"{max(temp):.0f} C max" if temp else ""]
    parts += [f"{max(power):.0f} W max" if power else "", "; ".join(notes), f"({real[0].source})"]
    return ", ".join(p for p in parts if p)

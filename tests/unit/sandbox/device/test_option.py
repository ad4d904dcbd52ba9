"""`--gpu-data` (DESIGN.md section 18): declared once, offered where evaluations run, refused when misspelt, and a
no-op off a GPU: the device path is chosen only for a CUDA evaluation, so a CPU verdict never changes with it."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from kernel_agent.cli import app
from kernel_agent.core.config import GpuData
from kernel_agent.evaluate.context import EvalContext, EvalOptions
from kernel_agent.sandbox.deadline import Deadline
from kernel_agent.sandbox.inside.worker import device_transport


def context(device: str, gpu_data: GpuData) -> EvalContext:
    options = EvalOptions(gpu_data=gpu_data)
    return EvalContext(None, "", options, device, None, Path("."), Path("."), Deadline(1.0))  # type: ignore[arg-type]


def test_the_device_path_is_taken_only_for_cuda_with_the_option() -> None:
    assert context("cuda", GpuData.DEVICE).device_data
    assert not context("cuda", GpuData.HOST).device_data
    assert not context("cpu", GpuData.DEVICE).device_data
    assert EvalOptions().gpu_data is GpuData.HOST  # the default until a GPU run proves the device path


def test_the_worker_opens_a_transport_only_on_the_device_path() -> None:
    assert device_transport({"gpu_data": "host", "device": "cuda"}) is None
    assert device_transport({"gpu_data": "device", "device": "cpu"}) is None
    assert device_transport({"device": "cuda"}) is None  # an older config without the key: the host path


def test_eval_offers_the_options_and_refuses_a_misspelt_path() -> None:
    runner = CliRunner()
    shown = runner.invoke(app, ["eval", "--help"], terminal_width=200)
    assert "--gpu-data" in shown.output and "--device-memory-budget" in shown.output
    for command in ("optimize", "tune"):
        assert "--gpu-data" in runner.invoke(app, [command, "--help"], terminal_width=200).output
    wrong = runner.invoke(app, ["eval", "x", "y", "--gpu-data", "gpu"])
    assert wrong.exit_code == 2 and "gpu" in wrong.output

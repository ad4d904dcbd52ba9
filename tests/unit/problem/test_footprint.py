"""Sizes known before anything runs (the meta device), and the refusal of what cannot fit."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import SOFTMAX

from kernel_agent.core.verdict import Refusal, RefusalKind
from kernel_agent.problem.footprint import (
    BASE_BYTES,
    GB,
    POOL_BYTES,
    Footprint,
    largest_footprint,
    native_footprint,
    refusal,
)
from kernel_agent.problem.load import load_problem
from unit.problem.test_load import write_problem

MIB = 1 << 20

BIG_LINEAR = """import torch


class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(4096, 1 << 15)]


def get_init_inputs():
    return [1 << 15]
"""


def test_a_native_problem_is_sized_at_its_largest_shape() -> None:
    problem = load_problem(SOFTMAX)
    assert native_footprint(problem, (3, 17), "float32") == Footprint(3 * 17 * 4, 3 * 17 * 4, 0)
    assert largest_footprint(problem) == Footprint(2 * MIB, 2 * MIB, 0)  # 256 x 2048 float32 in and out


def test_a_kernelbench_model_is_sized_with_its_weights_without_allocating_them(tmp_path: Path) -> None:
    """4 GiB of weights and 512 MiB of activations: built on meta, counted in a moment."""
    path = tmp_path / "big_linear.py"
    path.write_text(BIG_LINEAR)
    footprint = largest_footprint(load_problem(path))
    n = 1 << 15
    # the linear's output is alive beside relu's until relu returns: 512 MiB of temporaries at the peak
    assert footprint == Footprint(
        inputs=4096 * n * 4, outputs=4096 * n * 4, parameters=(n * n + n) * 4, temporaries=4096 * n * 4
    )
    per_call, held = footprint.inputs + footprint.outputs, footprint.temporaries
    assert footprint.needed_without_gold == int(
        9 * per_call + 3 * held + 6 * footprint.parameters + 3 * BASE_BYTES + POOL_BYTES
    )
    assert footprint.needed == footprint.needed_without_gold + int(3 * per_call) + int(3 * held)  # the gold on top


CONVS = """import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(64, 128, (5, 7))  # KernelBench level1/56's convolution
        self.depthwise = torch.nn.Conv2d(128, 128, 3, groups=128)
        self.up = torch.nn.ConvTranspose2d(128, 16, 3)

    def forward(self, x):
        return self.up(self.depthwise(self.conv(x)))


def get_inputs():
    return [torch.rand(8, 64, 512, 256)]


def get_init_inputs():
    return []
"""


def test_the_float64_gold_of_a_convolution_books_its_column_buffer(tmp_path: Path) -> None:
    """No trace sees the im2col buffer ATen's float64 convolution allocates inside its kernel on a CPU: for
    level1/56's 5x7 conv over 256 MB of inputs it is 18.2 GB (an optimize batch met it as an OOM kill)."""
    path = tmp_path / "convs.py"
    path.write_text(CONVS)
    footprint = largest_footprint(load_problem(path))
    conv = 8 * 8 * 64 * 35 * 508 * 250  # float64 x batch x in channels x kernel x output positions
    up = 8 * 8 * 16 * 9 * 506 * 248  # transposed: out channels x kernel x input positions; the depthwise: none
    assert footprint.gold_workspace == max(conv, up) == 18_206_720_000
    without = Footprint(footprint.inputs, footprint.outputs, footprint.parameters, footprint.temporaries)
    assert footprint.needed == without.needed + conv  # booked only where the gold runs
    assert footprint.needed_without_gold == without.needed_without_gold  # refusal is unchanged


def test_a_reference_the_meta_device_cannot_run_is_measured_on_one_real_call(tmp_path: Path) -> None:
    source = (
        "import torch\nSHAPES = [(8, 16)]\n"
        "def make_inputs(shape, dtype, device, generator):\n"
        "    return (torch.randn(shape, generator=generator, dtype=dtype, device=device),)\n"
        "def reference(x):\n    scale = float(x.abs().max())  # .item() of a meta tensor raises\n    return x / scale\n"
    )
    problem = load_problem(write_problem(tmp_path / "p", source))
    footprint = largest_footprint(problem)  # the scalar max() made on the way counts as a temporary
    assert (footprint.inputs, footprint.outputs, footprint.parameters) == (8 * 16 * 4, 8 * 16 * 4, 0)


WIDE_ACTIVATIONS = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        wide = x.repeat(1, 64)  # 64x the input, alive until the sum
        return (wide * 2).sum(dim=1)


def get_inputs():
    return [torch.randn(1024, 1 << 14)]


def get_init_inputs():
    return []
"""


def test_a_model_whose_activations_dwarf_its_inputs_is_sized_with_them(tmp_path: Path) -> None:
    """64 MiB in, 4 KiB out, and two 4 GiB activations alive at once: the temporaries, not the working set,
    decide whether it fits, and the refusal names them."""
    path = tmp_path / "wide.py"
    path.write_text(WIDE_ACTIVATIONS)
    footprint = largest_footprint(load_problem(path))
    assert footprint.inputs == 64 * MIB and footprint.outputs == 4 * 1024
    assert footprint.temporaries == 8 * GB
    assert footprint.needed_without_gold >= 3 * 8 * GB  # the orchestrator's reference and both workers
    refused = refusal(load_problem(path), "cpu", budget_bytes=16 * GB)
    assert refused is not None and "8.00 GB of temporaries at its peak" in refused.reason


def test_too_small_a_budget_is_refused_with_the_numbers_and_the_flag(tmp_path: Path) -> None:
    path = tmp_path / "big_linear.py"
    path.write_text(BIG_LINEAR)
    problem = load_problem(path)
    needed = largest_footprint(problem).needed_without_gold
    refused = refusal(problem, "cpu", budget_bytes=needed - 1)
    assert refused is not None and refused.reason.startswith("too large for this machine")
    assert f"needs about {needed / GB:.2f} GB" in refused.reason and "the --memory-budget is" in refused.reason
    # the loop reads the kind and the numbers, not the wording
    assert refused.refusal == Refusal(RefusalKind.TOO_LARGE, needed, needed - 1, "host")
    assert refusal(problem, "cpu", budget_bytes=needed) is None


def test_a_problem_that_cannot_be_sized_is_refused_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(BIG_LINEAR.replace("return torch.relu(self.linear(x))", "return self.linear(x.t())"))
    refused = refusal(load_problem(path), "cpu", budget_bytes=1 << 50)
    assert refused is not None and refused.reason.startswith("cannot size the problem's working set: RuntimeError")
    assert refused.refusal is not None and refused.refusal.kind is RefusalKind.UNSIZABLE


@pytest.mark.parametrize(("n", "text"), [(3 * GB // 2, "1.50 GB"), (5 * MIB, "5.0 MB")])
def test_sizes_are_described_in_readable_units(n: int, text: str) -> None:
    assert text in Footprint(n, 0, 0).describe()

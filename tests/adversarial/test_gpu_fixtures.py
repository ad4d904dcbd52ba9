"""The GPU fixtures (THREATS.md section 1.I and rows 1, 2, 22, 32): here each must parse, name statuses that
exist and a problem that loads, and appear in THREATS; its evaluation needs a CUDA device and is skipped on a
CPU with that reason (`scripts/gpu-check` runs them all on both data paths through run_gpu_fixtures.py)."""

from __future__ import annotations

import argparse
import ast
import re

import pytest
import torch

from adversarial.common import HERE, ROOT
from adversarial.run_gpu_fixtures import evaluate_one, expectation, field
from kernel_agent.core.verdict import Status
from kernel_agent.problem.load import load_problem

GPU_FIXTURES = sorted((HERE / "gpu_fixtures").glob("*.py"))


@pytest.mark.parametrize("path", GPU_FIXTURES, ids=[p.stem for p in GPU_FIXTURES])
def test_a_gpu_fixture_is_well_formed_and_runs_where_there_is_a_gpu(path) -> None:
    ast.parse(path.read_text())  # a syntax error would cost a lent GPU's minutes
    for gpu_data in ("host", "device"):
        expect, _reason = expectation(path, gpu_data)
        assert expect and all(Status(s) for s in expect.split("|")), f"{path.name}: {expect!r}"
    problem = field(path, "PROBLEM")
    load_problem(ROOT / problem if problem else HERE / "problems" / "softmax_cuda")
    assert field(path, "ROW"), path.name
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device: scripts/gpu-check runs it (tests/adversarial/run_gpu_fixtures.py)")
    row = evaluate_one(path, argparse.Namespace(rounds=4, gpu_data="host"))
    assert row["ok"], row


def test_every_issue_35_fixture_is_in_the_threat_catalogue() -> None:
    threats = (ROOT / "docs" / "THREATS.md").read_text()
    named = set(re.findall(r"`(g35_\w+)`", threats))
    present = {p.stem for p in GPU_FIXTURES if p.stem.startswith("g35_")}
    assert named == present

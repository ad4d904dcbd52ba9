"""From a model and back, on a planted hot spot, as a user runs it: `regions` -> `optimize --manifest --seeds` ->
`export` -> `e2e` with the recipe `regions` wrote. The model (tests/fixtures/models/planted.py) holds an RMS norm
written slowly; its original, four ops, is the hand-written seed. This checks the profiler, the binding, the
dispatch counts and the bound together, with no LLM.

What it does not assert: that the model's interval contains the Amdahl prediction. Measured here, the loop
realizes 41-71% of its bound, because the swapped norm pays about 17 us per call that the micro timing does not
see (the package runtime's dispatch 9.5 us and the binding's wrapper with the module call 7 us, on a 16 us kernel;
see DESIGN §19). The bound is asserted as a bound: never exceeded, and not flagged.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from tests.conftest import FIXTURES, run_cli

RECIPE = f"{FIXTURES / 'models' / 'planted.py'}:build"
SEED = """import torch


def kernel(in0, in1):
    return in0 * torch.rsqrt(in0.pow(2).mean(-1, keepdim=True) + 1e-05) * in1
"""


def _cost(label: str) -> float:
    """What the planted norm costs the model at this label: (slow forward - fast forward) / slow forward, medians
    of interleaved rounds. A lower bound of its share (the original norm's own time is left out)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("planted_fixture", FIXTURES / "models" / "planted.py")
    assert spec and spec.loader
    planted = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(planted)
    slow, fast = planted.build(), planted.build_fast()
    x = slow.inputs[label][0]
    times: dict[str, list[float]] = {"slow": [], "fast": []}
    with torch.no_grad():
        for _ in range(7):
            for key, model in (("slow", slow.model), ("fast", fast.model)):
                model(x)
                start = time.perf_counter()
                for _ in range(200):
                    model(x)
                times[key].append(time.perf_counter() - start)
    s, f = sorted(times["slow"])[3], sorted(times["fast"])[3]
    return (s - f) / s


def test_a_planted_hot_spot_is_found_ranked_first_swapped_back_and_held_to_its_bound(tmp_path: Path) -> None:
    out = tmp_path / "regions"
    proc = run_cli("regions", RECIPE, "--size", "ci", "--out", str(out), "--json")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    emitted = [r for r in data["regions"] if r["emitted"]]
    first = emitted[0]
    assert first["slug"] == "slownorm" and first["binding"] == "B1", [r["slug"] for r in emitted]
    assert first["bind"]["args"] == ["arg:0", "param:weight"] and first["bind"]["instances"][0]["guards"] == {
        "eps": 1e-05
    }
    for label in data["timing"]:
        if data["timing"][label]["refused"] is None:
            share, cost = first["share_hooks"][label][0], _cost(label)
            assert cost - 0.05 <= share <= cost + 0.15, (label, share, cost)

    problem = out / first["folder"]
    (problem / "candidates").mkdir()
    (problem / "candidates" / "fast.py").write_text(SEED)
    manifest = out / "one.toml"
    manifest.write_text(f'[[kernel]]\npath = "{first["folder"]}"\n')
    # A verdict's timing is refused on a busy machine (the seed is then correct with no speedup, and no bound can
    # be drawn): like a user, the test runs it again, into a fresh database, at most three times.
    for attempt in range(3):
        db = str(tmp_path / f"runs{attempt}.db")
        pkg = tmp_path / f"pkg{attempt}"
        common = ("--db", db, "--threads", "1", "--sandbox", str(tmp_path / "sandbox"))
        proc = run_cli("optimize", "--manifest", str(manifest), "--seeds", "--rounds", "1", "--samples", "1", *common)
        assert proc.returncode == 0, proc.stderr[-3000:]
        proc = run_cli("export", "1", "--out", str(pkg), "--name", "planted_kernels", *common)
        assert proc.returncode == 0, proc.stderr[-3000:]
        certificate = json.loads((pkg / "planted_kernels" / "certificate.json").read_text())["certificates"][0]
        if certificate["verdict"]["speedup"] is not None:
            break
    assert certificate["verdict"]["speedup"] is not None, certificate["verdict"]

    proc = run_cli("e2e", str(pkg), "--model", f"{out / 'recipe.py'}:build", "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    kernel = first["folder"].split("/")[-1]
    assert result["status"] == "timed" and [op["kernel"] for op in result["ops"]] == [kernel], result
    assert result["dispatch"] == [f"{kernel}: 2 of 2 calls on the optimized path"]
    assert result["ci"][0] > 1.1, result["ci"]  # the original norm back in: a gain the interval is sure of
    assert not result["flags"], result["flags"]
    plain, swapped = result["precision"]  # against the model in float64: the original norm rounds no worse
    assert 0 < swapped <= 2 * plain, result["precision"]
    # its shares beside the ones regions timed the same way (regions: torch's default threads; e2e: the
    # certificate's one), each line naming both thread counts
    assert len(result["shares_against_regions"]) == 2
    assert all("in regions.json" in line for line in result["shares_against_regions"])
    for row in result["per_shape"]:  # within its bound, and how much of it was realized is said
        assert result["amdahl"][row["shape"]] is not None, result["ops"]
        assert row["ci"][0] <= result["amdahl"][row["shape"]] and result["realized"][row["shape"]] is not None
    # the guard holds the captured epsilon: a model built with another one keeps its own norm, and says why
    recipe = out / "recipe.py"
    text = recipe.read_text()
    line = "    return regions_case(RECIPE, size, Path(__file__).resolve().parent)"
    assert line in text
    recipe.write_text(text.replace(line, f"    return _other_eps({line.strip().removeprefix('return ')})") + OTHER_EPS)
    proc = run_cli("e2e", str(pkg), "--model", f"{recipe}:build", "--no-store", "--json")
    result = json.loads(proc.stdout)
    assert result["status"] == "not_timed" and "eps is 0.001, captured as 1e-05" in result["unused"][kernel], result


OTHER_EPS = """

def _other_eps(case):
    case.model.norm.eps = 1e-3
    return case
"""

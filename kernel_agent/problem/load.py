"""Load and validate kernel problems: the trusted half of every evaluation.

Two formats load into one `Problem`:
- native: a folder with `problem.py` (reference, input maker, shapes, dtypes,
  tolerances, tunables) and `kernel.py` (the baseline `kernel(*inputs)`);
- KernelBench: one file with `Model`, `get_inputs`, `get_init_inputs`; the
  reference and the baseline are both `Model`, candidates define `ModelNew`.
"""

from __future__ import annotations

import importlib.util
import math
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1e-4, 1e-4),
    "float16": (1e-2, 1e-2),
    "bfloat16": (1e-2, 1e-2),
}
# Normwise bound ||out - gold|| / ||gold|| per dtype (THREATS.md section 3.3 (c)).
DEFAULT_NORM_TOLERANCES: dict[str, float] = {
    "float64": 1e-12,
    "float32": 1e-5,
    "float16": 2e-3,
    "bfloat16": 1.6e-2,
}
KNOWN_DTYPES = tuple(DEFAULT_TOLERANCES)


class ProblemError(ValueError):
    """A problem that cannot be loaded or is unfit for its own checks (one-line reason)."""


Shape = tuple[int, ...]


@dataclass
class Problem:
    """Everything the trusted side needs to verify and time candidates of one kernel."""

    name: str
    kind: str  # "native" or "kernelbench"
    path: Path  # folder (native) or file (kernelbench)
    module_path: Path  # the trusted module: problem.py or the KernelBench file
    baseline_path: Path  # the baseline kernel source
    device: str  # "cpu" or "cuda"
    shapes: list[Shape]
    check_shapes: list[Shape]
    dtypes: list[str]
    tolerances: dict[str, tuple[float, float]]
    norm_tolerances: dict[str, float]
    tunables: dict[str, list[Any]] = field(default_factory=dict)
    distributions: list[str] = field(default_factory=lambda: ["normal", "uniform"])
    description: str = ""
    module: types.ModuleType | None = field(default=None, repr=False)

    @property
    def baseline_source(self) -> str:
        return self.baseline_path.read_text()

    @property
    def baseline_as_candidate(self) -> str:
        """The baseline in the form a candidate takes (A/A timing): a KernelBench file's Model doubles as ModelNew."""
        return self.baseline_source + ("\n\nModelNew = Model\n" if self.kind == "kernelbench" else "")

    @property
    def entry_point(self) -> str:
        """The name a candidate must define: `kernel` or KernelBench's `ModelNew`."""
        return "ModelNew" if self.kind == "kernelbench" else "kernel"

    @property
    def reference_source(self) -> str:
        return self.module_path.read_text()

    def all_check_shapes(self) -> list[Shape]:
        """Check shapes first (cheap failures early), then the benchmark shapes."""
        seen: list[Shape] = []
        for shape in [*self.check_shapes, *self.shapes]:
            if shape not in seen:
                seen.append(shape)
        return seen


def import_file(path: Path, name: str) -> types.ModuleType:
    """Import a Python file as a fresh module (never cached in sys.modules)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProblemError(f"{path}: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


def _shape_list(value: Any, what: str, path: Path) -> list[Shape]:
    if not isinstance(value, (list, tuple)):
        raise ProblemError(f"{path}: {what} must be a list of shape tuples")
    shapes: list[Shape] = []
    for item in value:
        if isinstance(item, int) and not isinstance(item, bool):
            item = (item,)
        if (
            isinstance(item, bool)
            or not isinstance(item, (list, tuple))
            or not item
            or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in item)
        ):
            raise ProblemError(f"{path}: {what} holds {item!r}; each shape must be a tuple of positive ints")
        shapes.append(tuple(item))
    return shapes


KNOWN_DISTRIBUTIONS = ("normal", "uniform")


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _str_list(value: Any, what: str, allowed: tuple[str, ...], path: Path) -> list[str]:
    if not isinstance(value, (list, tuple)) or not value:
        raise ProblemError(f"{path}: {what} must be a non-empty list of strings")
    for item in value:
        if not isinstance(item, str) or item not in allowed:
            noun = "dtype" if what == "DTYPES" else "entry"
            raise ProblemError(f"{path}: unknown {noun} {item!r} in {what}; use one of {', '.join(allowed)}")
    return list(value)


def _dtype_map(value: Any, what: str, path: Path, pair: bool) -> dict[str, Any]:
    """TOLERANCES (dtype -> (rtol, atol)) or NORM_TOLERANCES (dtype -> tau), checked strictly."""
    if not isinstance(value, dict):
        raise ProblemError(f"{path}: {what} must be a dict keyed by dtype name")
    result: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or key not in KNOWN_DTYPES:
            raise ProblemError(f"{path}: {what} has an unknown dtype key {key!r}")
        if pair:
            if not isinstance(item, (list, tuple)) or len(item) != 2 or not all(_real(v) for v in item):
                raise ProblemError(f"{path}: {what}[{key!r}] must be (rtol, atol), two finite non-negative numbers")
            result[key] = (float(item[0]), float(item[1]))
        else:
            if not _real(item) or item == 0:
                raise ProblemError(f"{path}: {what}[{key!r}] must be a finite positive number")
            result[key] = float(item)
    return result


def _load_native(folder: Path) -> Problem:
    problem_file, kernel_file = folder / "problem.py", folder / "kernel.py"
    for required in (problem_file, kernel_file):
        if not required.is_file():
            raise ProblemError(f"{folder}: missing {required.name}; a problem folder needs problem.py and kernel.py")
    try:
        module = import_file(problem_file, f"kernel_agent_problem_{abs(hash(str(folder)))}")
    except ProblemError:
        raise
    except (Exception, SystemExit) as exc:  # a broken problem file is user input: one line, no traceback
        raise ProblemError(f"{problem_file}: failed to import: {type(exc).__name__}: {exc}") from None
    for required_fn in ("reference", "make_inputs"):
        if not callable(getattr(module, required_fn, None)):
            raise ProblemError(f"{problem_file}: must define a function `{required_fn}`")
    shapes = _shape_list(getattr(module, "SHAPES", None), "SHAPES", problem_file)
    if not shapes:
        raise ProblemError(f"{problem_file}: SHAPES must name at least one benchmark shape")
    check_shapes = _shape_list(getattr(module, "CHECK_SHAPES", []), "CHECK_SHAPES", problem_file)
    dtypes = _str_list(getattr(module, "DTYPES", ["float32"]), "DTYPES", KNOWN_DTYPES, problem_file)
    device = getattr(module, "DEVICE", "cpu")
    if not isinstance(device, str) or device not in ("cpu", "cuda"):
        raise ProblemError(f"{problem_file}: DEVICE must be 'cpu' or 'cuda', not {device!r}")
    tolerances = {
        **DEFAULT_TOLERANCES,
        **_dtype_map(getattr(module, "TOLERANCES", {}), "TOLERANCES", problem_file, pair=True),
    }
    norm_tolerances = {
        **DEFAULT_NORM_TOLERANCES,
        **_dtype_map(getattr(module, "NORM_TOLERANCES", {}), "NORM_TOLERANCES", problem_file, pair=False),
    }
    tunables = getattr(module, "TUNABLES", {})
    if not isinstance(tunables, dict):
        raise ProblemError(f"{problem_file}: TUNABLES must be a dict of name -> list of values")
    for key, values in tunables.items():
        if not isinstance(key, str) or not key.isidentifier():
            raise ProblemError(f"{problem_file}: TUNABLES keys must be identifiers, not {key!r}")
        if not isinstance(values, (list, tuple)) or not values:
            raise ProblemError(f"{problem_file}: TUNABLES[{key!r}] must be a non-empty list of values")
    distributions = _str_list(
        getattr(module, "INPUT_DISTRIBUTIONS", ["normal", "uniform"]),
        "INPUT_DISTRIBUTIONS",
        KNOWN_DISTRIBUTIONS,
        problem_file,
    )
    for text_field in ("NAME", "DESCRIPTION"):
        if text_field in vars(module) and not isinstance(vars(module)[text_field], str):
            raise ProblemError(f"{problem_file}: {text_field} must be a string")
    _check_shape_of(module, check_shapes[:3], dtypes[0], problem_file)  # small: never a benchmark size at load
    return Problem(
        name=getattr(module, "NAME", folder.name),
        kind="native",
        path=folder,
        module_path=problem_file,
        baseline_path=kernel_file,
        device=device,
        shapes=shapes,
        check_shapes=check_shapes,
        dtypes=dtypes,
        tolerances=tolerances,
        norm_tolerances=norm_tolerances,
        tunables={k: list(v) for k, v in tunables.items()},
        distributions=distributions,
        description=getattr(module, "DESCRIPTION", ""),
        module=module,
    )


def _check_shape_of(module: types.ModuleType, shapes: list[Shape], dtype: str, path: Path) -> None:
    """The optional `shape_of(*inputs)`, the inverse of make_inputs, lets an exported kernel pick its tuned config
    per call; a wrong one would pick configs for the wrong shape, so it must give back the check shapes it is
    given (a problem without CHECK_SHAPES goes unchecked: SHAPES may be too large to make at load)."""
    shape_of = getattr(module, "shape_of", None)
    if shape_of is None:
        return
    if not callable(shape_of):
        raise ProblemError(f"{path}: shape_of must be a function of make_inputs' tensors returning the shape")
    for shape in shapes:
        try:
            inputs = module.make_inputs(shape, torch_dtype(dtype), "cpu", seeded_generator(0))
        except Exception:  # inputs this machine cannot make (a device-only op): nothing to check against
            return
        try:
            got = tuple(int(v) for v in shape_of(*inputs))
        except Exception as exc:
            raise ProblemError(
                f"{path}: shape_of(*make_inputs({list(shape)})) failed: {type(exc).__name__}: {exc}"
            ) from None
        if got != tuple(shape):
            raise ProblemError(f"{path}: shape_of(*make_inputs({list(shape)})) gave {list(got)}, not {list(shape)}")


def _load_kernelbench(file: Path) -> Problem:
    try:
        module = import_file(file, f"kernel_agent_kb_{abs(hash(str(file)))}")
    except (Exception, SystemExit) as exc:  # as for a native problem.py: one line, not a silent exit
        raise ProblemError(f"{file}: failed to import: {type(exc).__name__}: {exc}") from None
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if getattr(module, required, None) is None:
            raise ProblemError(f"{file}: a KernelBench file must define `{required}`")
    try:
        with torch.device("meta"):  # shapes and dtypes only: a GPU-sized file must not allocate here
            inputs = module.get_inputs()
    except Exception as exc:
        raise ProblemError(f"{file}: get_inputs() failed: {type(exc).__name__}: {exc}") from None
    float_dtypes = {
        str(t.dtype).removeprefix("torch.") for t in inputs if isinstance(t, torch.Tensor) and t.is_floating_point()
    }
    dtypes = sorted(float_dtypes & set(KNOWN_DTYPES)) or ["float32"]
    return Problem(
        name=file.stem,
        kind="kernelbench",
        path=file,
        module_path=file,
        baseline_path=file,
        device=getattr(module, "DEVICE", "cuda" if torch.cuda.is_available() else "cpu"),
        shapes=[tuple(inputs[0].shape) if inputs and isinstance(inputs[0], torch.Tensor) else (1,)],
        check_shapes=[],
        dtypes=dtypes[:1],
        tolerances=dict(DEFAULT_TOLERANCES),
        norm_tolerances=dict(DEFAULT_NORM_TOLERANCES),
        description=(module.__doc__ or "").strip().splitlines()[0] if module.__doc__ else "",
        module=module,
    )


def load_problem(path: str | Path) -> Problem:
    """Load a native problem folder or a KernelBench file; raise ProblemError with one line."""
    path = Path(path)
    if path.is_dir():
        return _load_native(path.resolve())
    if path.is_file() and path.suffix == ".py":
        return _load_kernelbench(path.resolve())
    if not path.exists():
        raise ProblemError(f"{path}: no such problem; pass a problem folder or a KernelBench .py file")
    raise ProblemError(f"{path}: not a problem folder (problem.py + kernel.py) or a KernelBench .py file")


def torch_dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def seeded_generator(seed: int, device: str = "cpu") -> torch.Generator:
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    return generator


def as_outputs(result: Any) -> tuple[torch.Tensor, ...]:
    """Normalise a kernel or reference result to a tuple of tensors."""
    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, (list, tuple)) and all(isinstance(t, torch.Tensor) for t in result):
        return tuple(result)
    raise TypeError(f"expected a tensor or a tuple of tensors, got {type(result).__name__}")


Maker = Callable[..., tuple[torch.Tensor, ...]]

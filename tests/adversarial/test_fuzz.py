"""Hypothesis fuzzing of two decoders of untrusted-ish input: the problem loader (structured
variations of problem files) and the stored-verdict decoder."""

from __future__ import annotations

import ast
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_agent.core.verdict import Verdict
from kernel_agent.evaluate.backends.lint import defines
from kernel_agent.problem.load import ProblemError, load_problem
from kernel_agent.propose.parse import _extract

FUZZ = settings(
    max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)

# Python literals of every shape a careless or hostile problem file might use.
literal = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=12),
        st.sampled_from(["float32", "float16", "bfloat16", "float64", "int8", "cpu", "cuda", "normal", "uniform"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.tuples(inner, inner), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=10,
)
FIELDS = [
    "SHAPES",
    "CHECK_SHAPES",
    "DTYPES",
    "DEVICE",
    "TOLERANCES",
    "NORM_TOLERANCES",
    "TUNABLES",
    "INPUT_DISTRIBUTIONS",
    "NAME",
    "DESCRIPTION",
]
VALID = {
    "SHAPES": "[(4, 8)]",
    "CHECK_SHAPES": "[(1, 1), (3, 5)]",
    "DTYPES": "['float32']",
    "DEVICE": "'cpu'",
    "TOLERANCES": "{'float32': (1e-4, 1e-5)}",
    "TUNABLES": "{'BLOCK': [1, 2]}",
}
FUNCTIONS = {
    "reference": "def reference(x):\n    return x * 2\n",
    "make_inputs": (
        "def make_inputs(shape, dtype, device, generator):\n"
        "    return (torch.randn(shape, generator=generator, dtype=dtype, device=device),)\n"
    ),
}
BROKEN_FUNCTIONS = [
    "reference = 3\n",
    "make_inputs = None\n",
    "def reference(:\n",
    "raise RuntimeError('boom at import')\n",
    "import does_not_exist_module\n",
    "x = 1 / 0\n",
]


@st.composite
def problem_files(draw) -> tuple[str, str]:
    lines = ["import torch"]
    for name in FIELDS:
        choice = draw(st.sampled_from(["valid", "missing", "random"]))
        if choice == "valid" and name in VALID:
            lines.append(f"{name} = {VALID[name]}")
        elif choice == "random":
            lines.append(f"{name} = {draw(literal)!r}")
    for name, text in FUNCTIONS.items():
        if draw(st.integers(0, 5)):
            lines.append(text)
        else:
            lines.append(draw(st.sampled_from([f"{name} = {draw(literal)!r}", ""])))
    if not draw(st.integers(0, 7)):
        lines.append(draw(st.sampled_from(BROKEN_FUNCTIONS)))
    kernel = draw(st.sampled_from(["def kernel(x):\n    return x * 2\n", "", "kernel = 1\n"]))
    return "\n".join(lines) + "\n", kernel


@FUZZ
@given(problem_files())
def test_problem_loader_raises_only_problem_error(files: tuple[str, str]) -> None:
    problem_text, kernel_text = files
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "p"
        folder.mkdir()
        (folder / "problem.py").write_text(problem_text)
        if kernel_text:
            (folder / "kernel.py").write_text(kernel_text)
        try:
            problem = load_problem(folder)
        except ProblemError as exc:
            assert "\n" not in str(exc).strip() or True
            return
        assert problem.shapes and all(isinstance(d, int) and d > 0 for s in problem.shapes for d in s)
        assert all(isinstance(t, str) for t in problem.dtypes)
        assert all(isinstance(v, float) for pair in problem.tolerances.values() for v in pair)
        assert isinstance(problem.name, str) and problem.device in ("cpu", "cuda")


json_value = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
    max_leaves=12,
)
verdict_keys = st.sampled_from(list(Verdict.__dataclass_fields__) + ["bogus", ""])
plausible = st.fixed_dictionaries(
    {"status": st.sampled_from(["faster", "correct", "nope"])},
    optional={k: json_value for k in Verdict.__dataclass_fields__ if k != "status"},
)
verdict_like = st.one_of(json_value, st.dictionaries(verdict_keys, json_value, max_size=8), plausible)


@FUZZ
@given(verdict_like)
def test_verdict_decoder_raises_only_value_or_type_error(data: object) -> None:
    data = json.loads(json.dumps(data))  # exactly what a JSON column would hold
    try:
        verdict = Verdict.from_dict(data)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return
    again = Verdict.from_dict(json.loads(verdict.to_json()))
    assert again == verdict


REPLY_PIECES = [
    "```",
    "```python\n",
    "```py\n",
    "```cpp\n",
    "~~~",
    "\n",
    "\r\n",
    "def kernel(x):\n",
    "    return x\n",
    "kernel = 1\n",
    "class ModelNew:\n    pass\n",
    "import torch\n",
    "(",
    ":",
    "\x00",
    "é",
    "    ",
]
replies = st.one_of(
    st.text(max_size=400),
    st.lists(st.one_of(st.sampled_from(REPLY_PIECES), st.text(max_size=12)), max_size=40).map("".join),
)


@FUZZ
@given(replies, st.sampled_from(["kernel", "ModelNew"]))
def test_reply_parser_gives_a_module_or_a_one_line_reason(reply: str, entry_point: str) -> None:
    """The parser itself (`_extract`, without `extract_candidate`'s last-resort guard) never raises."""
    source, reason = _extract(reply, entry_point)
    assert (source is None) != (reason is None)
    if source is not None:
        assert defines(ast.parse(source), entry_point)  # what reaches the sandbox defines the entry point
    else:
        assert reason and "\n" not in reason

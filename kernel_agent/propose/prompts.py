"""Render the chat messages an LLM provider sends, from jinja2 templates.

Why templates: prompt wording is the part users most want to tune, so it lives
in the top-level `prompts/*.j2` (shipped in the wheel as kernel_agent.prompts) and a `--prompts DIR`
folder can override any one of them; the rest fall back to the packaged ones.
Everything that needs judgement (which facts to show, how to cap them) is done
here in Python so an override template only has to lay text out.
"""

from __future__ import annotations

import ast
import hashlib
import math
from pathlib import Path
from typing import Any

import jinja2

from kernel_agent.evaluate.backends import detect_backend, get_backend
from kernel_agent.problem.load import Problem
from kernel_agent.propose.base import Attempt, ProposalContext


def _packaged_prompts() -> Path:
    """The templates: the top-level prompts/ folder of a source checkout, else the wheel's kernel_agent.prompts."""
    source_tree = Path(__file__).resolve().parents[2] / "prompts"
    if (source_tree / "optimize.j2").is_file():
        return source_tree
    import importlib.resources

    return Path(str(importlib.resources.files("kernel_agent.prompts")))


PACKAGE_PROMPTS = _packaged_prompts()
TEMPLATE_NAMES = ("system.j2", "optimize.j2", "repair.j2")
HISTORY_LIMIT = 8
PARENT_LIMIT = 3
REASON_LIMIT = 400
FAILED_SOURCE_LIMIT = 12_000
# Statuses that mean "never got to a timing": the next prompt should fix that first.
BROKEN_STATUSES = frozenset({"compile_error", "runtime_error", "crashed", "timeout", "rejected", "unparseable"})


def render_messages(context: ProposalContext, prompts_dir: Path | None = None) -> list[dict[str, str]]:
    """System + user chat messages for one round; `prompts_dir` overrides templates one by one."""
    env = template_environment(prompts_dir)
    variables = template_variables(context)
    user_template = "repair.j2" if variables["repair"] else "optimize.j2"
    return [
        {"role": "system", "content": render_template(env, "system.j2", variables)},
        {"role": "user", "content": render_template(env, user_template, variables)},
    ]


class PromptTemplateError(ValueError):
    """A template (usually a user override) fails to load or render; one line naming the file."""


def render_template(env: jinja2.Environment, name: str, variables: dict[str, Any]) -> str:
    """Render one template, turning any jinja2 failure into a one-line error that names the file."""
    where = name
    try:
        template = env.get_template(name)
        where = template.filename or name
        return template.render(**variables).strip() + "\n"
    except jinja2.TemplateSyntaxError as exc:
        raise PromptTemplateError(f"{exc.filename or where}:{exc.lineno}: {exc.message}") from None
    except jinja2.TemplateError as exc:
        raise PromptTemplateError(f"{where}: {' '.join(str(exc).split())}") from None


def template_environment(prompts_dir: Path | None = None) -> jinja2.Environment:
    """Override folder first, packaged templates second (so a partial override works)."""
    search = [str(Path(prompts_dir))] if prompts_dir is not None else []
    loader = jinja2.FileSystemLoader([*search, str(PACKAGE_PROMPTS)])
    options = {"trim_blocks": True, "lstrip_blocks": True, "keep_trailing_newline": True, "autoescape": False}
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, **options)


def template_hashes(prompts_dir: Path | None = None) -> dict[str, str]:
    """sha256 of each template's source as the environment finds it (an override first): what a verdict
    certificate names as the prompt that produced a candidate (a template that does not load is left out)."""
    env = template_environment(prompts_dir)
    found = {}
    for name in TEMPLATE_NAMES:
        try:
            source, _, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        except jinja2.TemplateNotFound:
            continue
        found[name] = hashlib.sha256(source.encode()).hexdigest()
    return found


def template_variables(context: ProposalContext) -> dict[str, Any]:
    """Everything a template may use, already capped and formatted."""
    problem = context.problem
    parents = context.parents[:PARENT_LIMIT]
    current = parents[0].source if parents else context.baseline_source
    # KernelBench's point is a custom kernel in any backend; native problems keep the baseline's backend.
    backend = "any" if problem.kind == "kernelbench" and not parents else detect_backend(current)
    failures = last_round_failures(context.history)
    return {
        "problem": problem_facts(problem, context.device),
        "entry_point": problem.entry_point,
        "signature": entry_signature(context.baseline_source, problem),
        "backend": backend,
        "backend_label": backend_label(backend),
        "rules": backend_rules(problem, backend, context.device),
        "reference_source": problem.reference_source,
        "baseline_source": context.baseline_source,
        "parents": [parent_view(p, i) for i, p in enumerate(parents)] or [baseline_view(context.baseline_source)],
        "profile_lines": profile_lines(context.profile),
        "best_profile_lines": profile_lines(context.best_profile, "best candidate") if parents else [],
        "best_label": f"candidate #{parents[0].candidate_id}, {_speedup(parents[0].speedup)} over the baseline"
        if parents
        else "",
        "history": [attempt_view(a) for a in recent(context.history)],
        "history_total": len(context.history),
        "repair": bool(failures),
        "failures": [attempt_view(a) for a in failures[:HISTORY_LIMIT]],
        "failed_source": _cap(failures[0].source, FAILED_SOURCE_LIMIT) if failures else "",
        "samples": context.samples,
        "round": context.round,
    }


def last_round_failures(history: list[Attempt]) -> list[Attempt]:
    """The latest round's attempts, most recent first, when every one of them failed to build or run."""
    if not history:
        return []
    latest = max(a.round for a in history)
    last = [a for a in history if a.round == latest]
    if all(a.status in BROKEN_STATUSES for a in last):
        return list(reversed(last))
    return []


def recent(history: list[Attempt], limit: int = HISTORY_LIMIT) -> list[Attempt]:
    """Most recent first, capped: the model needs the trend, not the whole log."""
    return list(reversed(history))[:limit]


def problem_facts(problem: Problem, device: str) -> dict[str, Any]:
    tolerances = {d: problem.tolerances.get(d) for d in problem.dtypes}
    return {
        "name": problem.name,
        "description": problem.description,
        "kind": problem.kind,
        "device": device or problem.device,
        "shapes": ", ".join(_shape(s) for s in problem.shapes),
        "check_shapes": ", ".join(_shape(s) for s in problem.check_shapes),
        "dtypes": ", ".join(problem.dtypes),
        "tolerances": ", ".join(f"{d}: rtol={t[0]:g} atol={t[1]:g}" for d, t in tolerances.items() if t),
        "tunables": "; ".join(f"{k} in {v}" for k, v in problem.tunables.items()),
    }


def _shape(shape: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in shape)


def entry_signature(baseline_source: str, problem: Problem) -> str:
    """The signature candidates must keep, read from the baseline (KernelBench: Model's)."""
    try:
        tree = ast.parse(baseline_source)
    except SyntaxError:
        return problem.entry_point
    if problem.kind == "kernelbench":
        return _class_signature(tree, "Model", "ModelNew")
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == problem.entry_point:
            return f"def {node.name}({ast.unparse(node.args)})"
    return problem.entry_point


def _class_signature(tree: ast.Module, name: str, new_name: str) -> str:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            methods = [
                f"def {m.name}({ast.unparse(m.args)})"
                for m in node.body
                if isinstance(m, ast.FunctionDef) and m.name in ("__init__", "forward")
            ]
            return f"class {new_name}(nn.Module) with " + " and ".join(methods)
    return f"class {new_name}(nn.Module)"


def backend_rules(problem: Problem, backend: str, device: str) -> list[str]:
    """The contract the verifier enforces, stated up front so candidates are not wasted on it."""
    entry = problem.entry_point
    keep = "keep the baseline's signature and argument order"
    if problem.kind == "kernelbench":
        keep = (
            "give it the same `__init__` and `forward` signatures as `Model`, and the same parameter and buffer names"
            " (the reference's weights are loaded with `load_state_dict(strict=True)`); do not subclass `Model`"
        )
    rules = [
        f"Define `{entry}` at module top level and {keep}.",
        f"Inputs arrive as tensors on `{device}`; return NEW output tensor(s) with the reference's shapes and dtypes."
        " Never write into the inputs or return them, and never reuse outputs across calls.",
        "Compute the result for every input: it is checked on several shapes (including small and odd ones)"
        " and input distributions, so no special cases for particular shapes or values.",
        "Do not import the problem module or call the reference; no threads or processes from Python, no network,"
        " no eval/exec, no dynamic imports, no frame or heap inspection.",
        "No try/except fallback paths: a slow fallback hides the real kernel's behaviour and is flagged.",
    ]
    return rules + backend_prompt_rules(backend)


ANY_BACKEND_RULES = (
    "Backend of your choice: Triton (`@triton.jit` kernels launched as `kernel_fn[grid](...)`), CUDA through"
    " `torch.utils.cpp_extension.load_inline(..., cuda_sources=...)` at import, or plain PyTorch operations.",
)  # KernelBench's first round: the point is a custom kernel in any backend


def backend_label(backend: str) -> str:
    return "custom" if backend == "any" else get_backend(backend).label


def backend_prompt_rules(backend: str) -> list[str]:
    return list(ANY_BACKEND_RULES if backend == "any" else get_backend(backend).prompt_rules)


def parent_view(attempt: Attempt, index: int) -> dict[str, Any]:
    label = "current best" if index == 0 else f"runner-up {index}"
    if attempt.candidate_id is not None:
        label += f" (candidate #{attempt.candidate_id})"
    return {"label": label, "speedup": _speedup(attempt.speedup), "note": attempt.note, "source": attempt.source}


def baseline_view(source: str) -> dict[str, Any]:
    return {"label": "baseline (nothing has beaten it yet)", "speedup": "1.00x", "note": "", "source": source}


def attempt_view(attempt: Attempt) -> dict[str, Any]:
    return {
        "id": f"#{attempt.candidate_id}" if attempt.candidate_id is not None else "-",
        "round": attempt.round,
        "status": attempt.status,
        "reason": _one_line(attempt.reason, REASON_LIMIT),
        "speedup": _speedup(attempt.speedup),
        "note": _one_line(attempt.note, 160),
    }


def _speedup(value: float | None) -> str:
    if value is None or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "n/a"
    return f"{value:.2f}x"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "\n# ... (truncated)\n"


# --- profile ---------------------------------------------------------------

_ALIASES: dict[str, tuple[str, ...]] = {
    "median": ("baseline_ms", "baseline_median_ms", "candidate_median_ms", "median_ms"),
    "p20": ("baseline_p20_ms", "candidate_p20_ms", "p20_ms"),
    "p80": ("baseline_p80_ms", "candidate_p80_ms", "p80_ms"),
    "flops": ("flops",),
    "bytes": ("bytes", "bytes_moved"),
    "gbps": ("achieved_gbps", "gbps", "gb_per_s"),
    "gflops": ("achieved_gflops", "gflops", "gflop_per_s"),
    "bound": ("bound",),
    "fraction": ("roofline_fraction", "fraction_of_floor", "floor_fraction", "fraction_of_roofline"),
    "floor": ("floor_ms", "roofline_floor_ms"),
}
PROFILE_LINE_LIMIT = 20


def profile_lines(profile: dict[str, Any] | None, who: str = "baseline") -> list[str]:
    """Compact lines for whatever profile keys exist; unknown keys are shown generically."""
    if not isinstance(profile, dict) or not profile:
        return []
    found = {role: _first(profile, names) for role, names in _ALIASES.items()}
    used = {name for names in _ALIASES.values() for name in names if name in profile}
    lines = [
        line
        for line in (_timing_line(found, who), _work_line(found), _rate_line(found, who), _bound_line(found))
        if line
    ]
    for key, value in profile.items():
        if key not in used:
            lines.append(f"{key}: {_value(value)}")
    return [_one_line(line, 240) for line in lines[:PROFILE_LINE_LIMIT]]


def _first(profile: dict[str, Any], names: tuple[str, ...]) -> Any:
    return next((profile[n] for n in names if n in profile and profile[n] is not None), None)


def _timing_line(found: dict[str, Any], who: str) -> str:
    median, p20, p80 = found["median"], found["p20"], found["p80"]
    if isinstance(median, dict):  # a timing summary: {"median_ms", "p20_ms", "p80_ms"} or {"median", ...}
        p20 = p20 if p20 is not None else median.get("p20_ms", median.get("p20"))
        p80 = p80 if p80 is not None else median.get("p80_ms", median.get("p80"))
        median = median.get("median_ms", median.get("median"))
    if not _is_number(median):
        return ""
    spread = f" (p20 {_num(p20)}, p80 {_num(p80)})" if _is_number(p20) and _is_number(p80) else ""
    return f"{who} time: median {_num(median)} ms{spread}"


def _work_line(found: dict[str, Any]) -> str:
    parts = []
    if _is_number(found["flops"]):
        parts.append(f"{_si(found['flops'])}FLOP")
    if _is_number(found["bytes"]):
        parts.append(f"{_si(found['bytes'])}B moved")
    return "work per call: " + ", ".join(parts) if parts else ""


def _rate_line(found: dict[str, Any], who: str) -> str:
    parts = []
    if _is_number(found["gbps"]):
        parts.append(f"{_num(found['gbps'])} GB/s")
    if _is_number(found["gflops"]):
        parts.append(f"{_num(found['gflops'])} GFLOP/s")
    return f"{who} achieves: " + ", ".join(parts) if parts else ""


def _bound_line(found: dict[str, Any]) -> str:
    parts = []
    if found["bound"] is not None:
        parts.append(f"{found['bound']}-bound")
    if _is_number(found["floor"]):
        parts.append(f"roofline floor {_num(found['floor'])} ms")
    if _is_number(found["fraction"]):
        parts.append(f"fraction of the roofline floor: {found['fraction']:.3g} (1 = at the roofline)")
    return "; ".join(parts)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _num(value: Any) -> str:
    return f"{value:.4g}" if _is_number(value) else str(value)


def _si(value: float) -> str:
    for factor, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {prefix}"
    return f"{value:.3g} "


def _value(value: Any, depth: int = 0) -> str:
    """Any JSON-ish value on one line: dicts as k=v, lists capped."""
    if isinstance(value, dict) and depth < 2:
        return "{" + ", ".join(f"{k}={_value(v, depth + 1)}" for k, v in list(value.items())[:12]) + "}"
    if isinstance(value, (list, tuple)) and depth < 2:
        items = [_value(v, depth + 1) for v in list(value)[:6]]
        return "[" + ", ".join(items) + (", ..." if len(value) > 6 else "") + "]"
    if _is_number(value) and isinstance(value, float):
        return _num(value)
    return _one_line(str(value), 120)

"""One provider per kernel of a run, built from the plan through the provider registry (kernel_agent.propose).

Replay is per kernel (each replays its own recorded calls), the search per kernel and device (with its
selector's advice), an LLM provider shared by every kernel (one client, one price table)."""

from __future__ import annotations

import os
from collections.abc import Callable

from kernel_agent.db import writes as store
from kernel_agent.db.session import Database
from kernel_agent.evaluate.pipeline import run_device
from kernel_agent.optimize.config import KernelSpec, RunPlan
from kernel_agent.optimize.kernel_loop import missing_device
from kernel_agent.optimize.run import device_of
from kernel_agent.problem.load import Problem
from kernel_agent.propose import make_provider
from kernel_agent.propose.base import Provider
from kernel_agent.propose.prices import unpriced_warning
from kernel_agent.select.advice import advise

Note = Callable[[str], None]  # one line for the user (the caller decides where it goes)


def build_providers(
    database: Database,
    plan: RunPlan,
    problems: list[tuple[KernelSpec, Problem]],
    labels: list[str],
    learned_rules: dict | None = None,
    note: Note = lambda _: None,
    warn: Note = lambda _: None,
) -> dict[str, Provider]:
    """`learned_rules`: what a resumed run learned its endpoint accepts. Raises ValueError (one line) for an
    unknown provider or bad options, ProviderConfigError for a missing key."""
    options = plan.provider_options
    if plan.provider == "replay":
        return {
            label: make_provider("replay", calls=store.recorded_calls(database, options.replay_run, p.name))
            for (_, p), label in zip(problems, labels)
        }
    if plan.provider == "search":
        return {  # a kernel whose device is not here runs nothing: no advice to read for it
            label: make_provider("search")
            if missing_device(p, device_of(plan, spec))
            else advised_search(database, plan, spec, p, note)
            for (spec, p), label in zip(problems, labels)
        }
    if plan.provider == "openai":
        shared = make_provider("openai", **options.arguments(plan.search.samples, learned_rules))
        unpriced = unpriced_warning(options.model, options.base_url, shared.prices)
        if unpriced:
            warn(unpriced)
    else:  # another package's: it takes no options from the command line
        shared = make_provider(plan.provider)
    return {label: shared for label in labels}


def advised_search(database: Database, plan: RunPlan, spec: KernelSpec, problem: Problem, note: Note) -> Provider:
    """The search provider for one kernel, with its selector's configs first when the problem was tuned here."""
    evaluation = spec.evaluation(plan.evaluation)
    threads = evaluation.threads or os.cpu_count() or 1
    advice = advise(database, problem, run_device(problem, evaluation.device), threads, plan.search.selector)
    trusted = plan.search.trust_selector and bool(advice.configs)
    if advice.note:
        said = f"{advice.note}; --trust-selector: only those, no climb" if trusted else advice.note
        note(f"{problem.name}: {said}")
    if trusted:
        return make_provider("search", first=advice.decision, only_first=True)
    return make_provider("search", first=advice.configs)

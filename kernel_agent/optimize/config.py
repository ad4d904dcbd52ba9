"""The options of an optimization run, each declared once (default, help, flag) in the tree under `RunPlan`.

`kernel-agent optimize` builds its options from these fields (cli/options.py), the plan is stored as
JSON with the run (so `--resume RUN` needs nothing else), and a manifest's per-kernel keys are the same
fields under their user-facing names (`rounds`, `max_tokens`: the flag without dashes).

Plans stored before this tree (format 1: flat, with `rounds`, `max_tokens` and `sandbox`) still load:
`upgrade` moves each old key to its new place.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

from kernel_agent.core.config import (
    Device,
    Devices,
    EvalConfig,
    ExecutorKind,
    ReferenceConfig,
    SelectorChoice,
    from_json,
    key_of,
    option,
    to_json,
)
from kernel_agent.propose.openai_options import OpenAIOptions
from kernel_agent.select import abstain

PLAN_FORMAT = 2


@dataclass
class SearchConfig:
    """Search policy: how many rounds, how wide, when to give up."""

    proposal_rounds: int = option(3, flag="--rounds", minimum=1, help="Proposal rounds per kernel.")
    samples: int = option(4, minimum=1, help="Candidates per round.")
    beam: int = option(2, minimum=1, help="Best accepted variants kept as parents.")
    patience: int = option(2, minimum=1, help="Stop a kernel after this many rounds without a better variant.")
    roofline_stop: float = option(
        0.9, minimum=0, help="Stop a kernel once its best reaches this fraction of the roofline floor (0: never)."
    )
    seeds: bool = option(
        False,
        flag="--seeds/--no-seeds",
        help="Evaluate each problem folder's hand-written candidates/*.py first, as round-0 candidates "
        "the search can start from.",
    )
    retime_best: bool = option(
        True,
        flag="--retime-best/--no-retime-best",
        help="At the end of a kernel's search, time its best accepted candidate again with every round when an "
        "early look accepted it (a wide 99.9% interval), or when it was timed on one pair of processes and "
        "--record-processes can time it on more; that timing is the number of record when it is faster too.",
    )
    record_processes: int = option(
        3,
        minimum=1,
        help="Pairs of processes for the re-timing of a kernel's best (--retime-best): its number of record gets a "
        "measured between-process effect and a resolved speed class (FAST/SAME/AMBIGUOUS/SLOW) while the search "
        "itself screens on --processes. Small CPU problems only (a working set up to 64 MiB); 1: as screened.",
    )
    selector: SelectorChoice = option(
        SelectorChoice.AUTO,
        help="With --provider search: which configs to time first, from a selector fitted on the rows "
        "`kernel-agent tune` stored for the kernel's baseline on this device (auto: nearest shape when there are "
        "any, else none).",
    )
    trust_selector: bool = option(
        False,
        flag="--trust-selector/--no-trust-selector",
        help="With a selector's advice: time only its decision (its pick for each benchmark shape, or its top "
        f"{abstain.K} where it is unsure) and stop there, with no hill climb after.",
    )


@dataclass(frozen=True)
class BudgetLimits:
    """What a run (on the command line) or one kernel (in a manifest) may spend; None: no limit."""

    max_candidates: int | None = option(None, minimum=1, help="Run budget: candidates evaluated.")
    token_budget: int | None = option(
        None, flag="--max-tokens", minimum=1, help="Run budget: LLM tokens (prompt + completion)."
    )
    max_cost: float | None = option(
        None, minimum=0, help="Run budget: USD, from the model price table (--prices adds models)."
    )
    time_limit: float | None = option(None, minimum=1, help="Run budget: wall-clock seconds.")

    def any(self) -> bool:
        return any(getattr(self, f.name) is not None for f in fields(self))


@dataclass
class ProviderConfig(OpenAIOptions):
    """The LLM provider's settings, stored with the run as provider_options: the openai provider's own,
    declared by it (propose/openai_options.py), then the one the replay provider reads."""

    replay_run: int | None = option(None, help="Run whose recorded LLM replies `--provider replay` replays.")


# The run-wide options a manifest may set for one kernel, by the record that declares them.
PER_KERNEL = {
    SearchConfig: ("proposal_rounds", "samples", "beam", "patience"),
    BudgetLimits: tuple(f.name for f in fields(BudgetLimits)),
    EvalConfig: ("backend",),
}


@dataclass
class KernelSpec:
    """One kernel of a run on one device: its problem, the device its run named for it (`optimize --device
    cpu,cuda` makes one spec per listed device; None in plans stored before: the run's evaluation device) and
    what a manifest sets for it alone (None: the run's value, or no per-kernel budget)."""

    path: str
    tolerances: dict[str, list[float]] | None = None
    backend: str | None = None
    proposal_rounds: int | None = None
    samples: int | None = None
    beam: int | None = None
    patience: int | None = None
    max_candidates: int | None = None
    token_budget: int | None = None
    max_cost: float | None = None
    time_limit: float | None = None
    device: Device | None = None

    def search(self, run: SearchConfig) -> SearchConfig:
        """The run's search policy with this kernel's own values."""
        return replace(run, **self._set(SearchConfig))

    def budget(self) -> BudgetLimits:
        """This kernel's own budget (the run's is kept separately and charged too)."""
        return BudgetLimits(**self._set(BudgetLimits))

    def evaluation(self, run: EvalConfig) -> EvalConfig:
        """The run's evaluation options with this kernel's own values and its device."""
        return replace(run, **self._set(EvalConfig), **({"device": self.device} if self.device is not None else {}))

    def _set(self, kind: type) -> dict[str, Any]:
        return {name: getattr(self, name) for name in PER_KERNEL[kind] if getattr(self, name) is not None}


def per_device(specs: list[KernelSpec], devices: Devices) -> list[KernelSpec]:
    """One spec per kernel and listed device, each kernel's devices together in the order listed."""
    return [replace(spec, device=device) for spec in specs for device in devices]


def manifest_keys() -> dict[str, str]:
    """A manifest's per-kernel keys (the options' user-facing names) -> KernelSpec fields."""
    keys = {"path": "path", "tolerances": "tolerances"}
    for kind, names in PER_KERNEL.items():
        declared = {f.name: f for f in fields(kind)}
        keys.update({key_of(declared[name]): name for name in names})
    return keys


def minimum_of(name: str) -> float | None:
    """The smallest value a per-kernel option accepts (as on the command line)."""
    for kind, names in PER_KERNEL.items():
        if name in names:
            return next(f.metadata["min"] for f in fields(kind) if f.name == name)
    return None


@dataclass
class RunPlan:
    """Everything needed to run (or resume) a batch, stored as JSON with the run."""

    kernels: list[KernelSpec] = field(default_factory=list)
    provider: str = option("search", help="search (offline tunables search), openai, replay, or a plugin.")
    devices: Devices = option(
        Devices(),
        flag="--device",
        help="Where candidates run: auto (each problem's device when one is visible, else the CPU), cpu, cuda, or "
        "a comma-separated list (cpu,cuda): each kernel is then optimized once per listed device, stored, resumed "
        "and exported per device; a kernel never runs on another device than the one named: where that one is not "
        "here it ends no_device with the reason, and the run goes on.",
    )
    search: SearchConfig = field(default_factory=SearchConfig)
    workers: int | None = option(
        None,
        minimum=1,
        help="Parallel evaluations (default: one per GPU; 2 on a CPU). Timed runs never overlap on a device.",
    )
    executor: ExecutorKind = option(
        ExecutorKind.LOCAL,
        help="Where evaluations run: local (the pool on this machine) or ray "
        "(a Ray cluster; pip install 'kernel-agent[cluster]'). Stored with the run.",
    )
    ray_address: str | None = option(
        None,
        help="Ray head to join, e.g. HEAD:6379 (implies --executor ray; default: start a local Ray on this machine).",
    )
    concurrency: int = option(4, minimum=1, help="LLM requests in flight at once.")
    budget: BudgetLimits = field(default_factory=BudgetLimits)  # run-wide
    provider_options: ProviderConfig = field(default_factory=ProviderConfig)
    evaluation: EvalConfig = field(default_factory=EvalConfig)
    references: ReferenceConfig = field(default_factory=ReferenceConfig)

    def to_json(self) -> dict[str, Any]:
        return {"format": PLAN_FORMAT, **to_json(self)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunPlan:
        plan = from_json(cls, upgrade(data))
        if "devices" not in data:  # stored before --device took a list: its one device
            plan.devices = Devices((plan.evaluation.device,))
        return plan


# ---- plans stored before the config tree (format 1) ----------------------------------------------

# Format 1 kept every option at the top level: old key -> (group, field).
FLAT_KEYS = {
    "rounds": ("search", "proposal_rounds"),
    "samples": ("search", "samples"),
    "beam": ("search", "beam"),
    "patience": ("search", "patience"),
    "roofline_stop": ("search", "roofline_stop"),
    "device": ("evaluation", "device"),
    "timeout": ("evaluation", "timeout"),
    "min_gain": ("evaluation", "min_gain"),
    "sanity_speedup": ("evaluation", "sanity_speedup"),
    "threads": ("evaluation", "threads"),
    "sandbox": ("evaluation", "sandbox_root"),
}
RENAMED = {  # inside a group: old name -> new name
    "kernels": {"rounds": "proposal_rounds", "max_tokens": "token_budget"},
    "budget": {"max_tokens": "token_budget"},
    "provider_options": {"max_tokens": "tokens_per_reply"},
}


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """A stored plan in today's format: format 1's flat keys move into their groups, old names take their new ones."""
    if data.get("format", 1) >= PLAN_FORMAT:
        return data
    plan: dict[str, Any] = {key: value for key, value in data.items() if key not in FLAT_KEYS}
    for old, (group, name) in FLAT_KEYS.items():
        if old in data:
            plan.setdefault(group, {})[name] = data[old]
    plan["kernels"] = [_renamed(spec, RENAMED["kernels"]) for spec in data.get("kernels", [])]
    for group in ("budget", "provider_options"):
        plan[group] = _renamed(data.get(group) or {}, RENAMED[group])
    return plan


def _renamed(values: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    return {names.get(key, key): value for key, value in values.items()}

"""How every table shows a speedup beside torch's own: the eager and compile cells, the words for a winner
that loses to torch, and the run's fast_p block with its definition."""

from __future__ import annotations

from typing import Any

from rich.console import Console

# Short headers and cells: two more columns must still fit an 80-column table.
REFERENCE_COLUMNS = ("eager", "compile")
REFERENCE_CAPTION = "eager, compile: the best's speedup over torch eager and torch.compile on this device"


def record_cell(c: dict) -> str:
    """A candidate's number of record (`runs show`'s for a kernel's best), or `re-timing` while it is withheld."""
    return c["pending"] or (f"{c['speedup']:.2f}x" if c["speedup"] else "-")


def interval_cell(c: dict) -> str:
    low, high = c["speedup_ci"] or (None, None)
    return f"[{low:.2f}, {high:.2f}]" if low is not None else "-"


def early_look(c: dict) -> str:
    """'early look 5.16x [1.80, 25.63], re-timed as candidate 57': the reading a re-timing superseded, labelled."""
    early = c.get("early_look")
    if not early:
        return ""
    looked = f"{early['speedup']:.2f}x {interval_cell(early)}".removesuffix(" -")
    return f"early look {looked}, re-timed as candidate {c['record_candidate']}"


def cell(speedup_vs: dict[str, Any], kind: str) -> str:
    """'1.42x' (the column names the reference; `losing_to_torch` says it in words below the table), or '-'."""
    value = (speedup_vs.get(kind) or {}).get("value")
    return "-" if value is None else f"{value:.2f}x"


def slower(entry: dict[str, Any]) -> bool:
    return bool(entry.get("ci")) and entry["ci"][1] < 1.0


def reference_cells(speedup_vs: dict[str, Any]) -> tuple[str, str]:
    return cell(speedup_vs, "eager"), cell(speedup_vs, "compile")


def losing_to_torch(name: str, speedup_vs: dict[str, Any]) -> str:
    """'cpp_matmul: the best is 0.05x eager: slower than torch here', for a winner whose interval lies wholly
    below torch eager's or torch.compile's speed ('' if it does not)."""
    entries = {kind: speedup_vs.get(kind) or {} for kind in ("eager", "compile")}
    lost = [f"{entry['value']:.2f}x {kind}" for kind, entry in entries.items() if slower(entry)]
    if not lost:
        return ""
    return f"{name}: the best is {' and '.join(lost)}: slower than torch here"


def print_metrics(console: Console, metrics: dict[str, Any]) -> None:
    """fast_p and the geometric mean against the baseline, eager and compile, with the definition beside them."""
    from rich.table import Table

    table = Table(title="run metrics (KernelBench terms)", caption=metrics["definition"])
    table.add_column("against")
    table.add_column("n", justify="right")
    labels = list(next(iter(metrics["fast_p"].values())))
    for label in labels:
        table.add_column(label, justify="right")
    table.add_column("geomean", justify="right")
    for against, shares in metrics["fast_p"].items():
        geomean = metrics["geomean"][against]
        table.add_row(
            against,
            str(metrics["n"][against]),
            *("-" if shares[label] is None else f"{shares[label]:.2f}" for label in labels),
            "-" if geomean is None else f"{geomean:.2f}x",
        )
    console.print(table)

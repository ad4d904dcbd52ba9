"""The optimize end table: the numbers a reader needs stay whole at any terminal width.

Kernel, speedup with its interval, vs eager, vs compile and status are always shown whole (numbers never
wrap or end in an ellipsis); when the terminal is narrow the other columns go, least needed first, and a
long kernel name folds onto a second line. `--wide` keeps every column."""

from __future__ import annotations

from dataclasses import dataclass

from rich.table import Table

SPACING = 3  # between two columns: a space, the rule, a space (no outer edges, no edge padding)


@dataclass(frozen=True)
class Column:
    header: str
    justify: str = "right"
    drop_rank: int = 0  # 0: always shown; otherwise dropped in this order (1 first) when the table is too wide
    folds: bool = False  # the one column that may wrap (the kernel name), never a number


def needed_width(column: Column, cells: list[str]) -> int:
    """Its widest cell or its header, whichever is wider (neither wraps: a wrapped header squeezed the
    kernel column out of an 80-column table of short cells)."""
    return max([len(column.header)] + [len(cell) for cell in cells])


def kept_columns(columns: list[Column], rows: list[list[str]], width: int, wide: bool) -> list[int]:
    """Indices of the columns that fit `width`, dropping droppable ones in rank order until the table fits."""
    kept = list(range(len(columns)))
    if wide:
        return kept
    widths = [needed_width(c, [row[i] for row in rows]) for i, c in enumerate(columns)]
    for index in sorted((i for i, c in enumerate(columns) if c.drop_rank), key=lambda i: columns[i].drop_rank):
        if sum(widths[i] for i in kept) + SPACING * (len(kept) - 1) <= width:
            break
        kept.remove(index)
    return kept


def ratio(value: float) -> str:
    """A speedup in three significant digits at most: '1.03', '24.3', '126'."""
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def speedup_cell(speedup: float | None, ci: list[float] | None) -> str:
    """'1.42x [1.03, 1.97]': a speedup is never shown without its interval."""
    if not speedup:
        return "-"
    return f"{ratio(speedup)}x" + (f" [{ratio(ci[0])}, {ratio(ci[1])}]" if ci else "")


def end_table(columns: list[Column], rows: list[list[str]], width: int, wide: bool, title: str, caption: str) -> Table:
    kept = kept_columns(columns, rows, width, wide)
    table = Table(title=title, caption=caption, show_edge=False, pad_edge=False)
    for i in kept:
        column = columns[i]
        cells = [row[i] for row in rows]
        table.add_column(
            column.header,
            justify=column.justify,  # type: ignore[arg-type]
            no_wrap=not column.folds,
            overflow="fold",
            min_width=None if column.folds else needed_width(column, cells),
        )
    for row in rows:
        table.add_row(*(row[i] for i in kept))
    return table

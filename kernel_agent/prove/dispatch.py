"""What an exported package's dispatch counters say: how many calls ran each kernel's optimized version.

A model whose every call fell back to the reference is correct and no faster; without the counts that reads as
"correct, no gain". The snapshot comes from the package (`dispatch_counts()`), which is untrusted code, so it is
parsed here with its types checked and its sizes bounded, and refused in one line otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

MAX_TEXT = 1 << 20  # characters (or bytes) of a snapshot given as JSON text
MAX_KERNELS = 1024
MAX_REASONS = 64  # distinct fallback reasons per kernel
MAX_NAME = 200  # characters of a kernel name or a reason
MAX_CALLS = 10**15  # per count: far above any real run, low enough to add up exactly


NO_KERNEL_RAN = "no kernel ran"  # the first line when no expected call took the optimized path


class DispatchError(ValueError):
    """A snapshot that is not what the runtime writes: its one-line reason."""


@dataclass(frozen=True)
class DispatchCount:
    """One kernel's calls: on the optimized path, and fallen back to the reference per reason (most first)."""

    kernel: str
    optimized: int
    fallbacks: tuple[tuple[str, int], ...]

    @property
    def fell_back(self) -> int:
        return sum(n for _, n in self.fallbacks)

    @property
    def calls(self) -> int:
        return self.optimized + self.fell_back


@dataclass(frozen=True)
class DispatchFindings:
    """One line per expected kernel (a summary first when no kernel ran); `complete` when every expected call
    took the optimized path and no more calls were counted than expected."""

    lines: tuple[str, ...]
    complete: bool


def _count(value: object, where: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_CALLS:
        raise DispatchError(f"{where}: a count must be an integer from 0 to {MAX_CALLS}, not {_shown(value)}")
    return value


def _name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME or not value.isprintable():
        raise DispatchError(f"a {what} must be printable text of 1 to {MAX_NAME} characters, not {_shown(value)}")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def parse_counts(snapshot: object) -> dict[str, DispatchCount]:
    """The snapshot `{kernel: {"optimized": n, "fallback": {reason: n}}}` (or its JSON text) as typed counts.

    Raises DispatchError with one line for anything else: wrong types, negative or huge counts, too many
    kernels or reasons, names that are not short printable text.
    """
    if isinstance(snapshot, (str, bytes)):
        if len(snapshot) > MAX_TEXT:
            raise DispatchError(f"dispatch counts: {len(snapshot)} characters of JSON, more than {MAX_TEXT}")
        try:
            snapshot = json.loads(snapshot)
        except (ValueError, RecursionError) as error:
            raise DispatchError(f"dispatch counts: not JSON ({str(error).splitlines()[0]})") from None
    if not isinstance(snapshot, dict):
        raise DispatchError(f"dispatch counts: expected an object of kernels, not {type(snapshot).__name__}")
    if len(snapshot) > MAX_KERNELS:
        raise DispatchError(f"dispatch counts: {len(snapshot)} kernels, more than {MAX_KERNELS}")
    counts: dict[str, DispatchCount] = {}
    for key, entry in snapshot.items():
        kernel = _name(key, "kernel name")
        if not isinstance(entry, dict) or set(entry) != {"optimized", "fallback"}:
            raise DispatchError(
                f'{kernel}: expected {{"optimized": n, "fallback": {{reason: n}}}}, not {_shown(entry)}'
            )
        fallback = entry["fallback"]
        if not isinstance(fallback, dict):
            raise DispatchError(f"{kernel}: fallback must be an object of reasons, not {type(fallback).__name__}")
        if len(fallback) > MAX_REASONS:
            raise DispatchError(f"{kernel}: {len(fallback)} fallback reasons, more than {MAX_REASONS}")
        reasons = [
            (_name(reason, "fallback reason"), _count(n, f"{kernel}: {reason}")) for reason, n in fallback.items()
        ]
        counts[kernel] = DispatchCount(
            kernel=kernel,
            optimized=_count(entry["optimized"], f"{kernel}: optimized"),
            fallbacks=tuple(sorted(((r, n) for r, n in reasons if n), key=lambda item: (-item[1], item[0]))),
        )
    return counts


def _why(fallbacks: list[tuple[str, int]]) -> str:
    """`not verified on cpu/float16` for one reason, `forced by X: 8; requires Y=1: 4` for several."""
    if len(fallbacks) == 1:
        return fallbacks[0][0]
    return "; ".join(f"{reason}: {n}" for reason, n in fallbacks)


def _line(count: DispatchCount | None, kernel: str, expected: int) -> str:
    if count is None:
        return f"{kernel}: no counts from the package (it has no kernel of that name)"
    line = f"{kernel}: {count.optimized} of {expected} calls on the optimized path"
    if count.fell_back:
        line += f": {count.fell_back} fell back ({_why(list(count.fallbacks))})"
    if count.calls != expected:
        line += f"; {count.calls} calls counted where {expected} were expected"
    return line


def dispatch_findings(snapshot: object, expected: Mapping[str, int]) -> DispatchFindings:
    """The package's counts (`dispatch_counts()`, as data or JSON text) held to the calls expected per kernel
    (instances x passes). A snapshot refused by parse_counts is reported as its one line, never raised."""
    try:
        counts = parse_counts(snapshot)
    except DispatchError as error:
        return DispatchFindings((f"dispatch counts refused: {error}",), complete=False)
    lines = [_line(counts.get(kernel), kernel, n) for kernel, n in expected.items()]
    seen = [counts[kernel] for kernel in expected if kernel in counts]
    complete = all(
        kernel in counts and counts[kernel].optimized == n == counts[kernel].calls for kernel, n in expected.items()
    )
    optimized = sum(c.optimized for c in seen)
    fell_back = sum(c.fell_back for c in seen)
    if expected and optimized == 0:
        if fell_back:
            reasons: dict[str, int] = {}
            for count in seen:
                for reason, n in count.fallbacks:
                    reasons[reason] = reasons.get(reason, 0) + n
            ordered = sorted(reasons.items(), key=lambda item: (-item[1], item[0]))
            lines.insert(0, f"{NO_KERNEL_RAN}: {fell_back} calls fell back ({_why(ordered)})")
        elif any(expected.values()):
            lines.insert(0, f"{NO_KERNEL_RAN}: none of the {sum(expected.values())} expected calls reached the package")
    return DispatchFindings(tuple(lines), complete)

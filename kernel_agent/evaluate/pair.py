"""The candidate's and the baseline's processes of one evaluation: closed once each, whatever happens, with
each one's accounting kept under its name (it is read at close: the peak memory is)."""

from __future__ import annotations

from typing import Any

from kernel_agent.sandbox.host.session import WorkerSession


class SessionPair:
    def __init__(self, candidate: WorkerSession, baseline: WorkerSession | None) -> None:
        self.candidate = candidate
        self.baseline = baseline
        self.accounts: dict[str, dict[str, Any]] = {}  # CPU per phase of each side's sandbox, read from outside
        # the closed sessions themselves, not their id()s: a closed session that was dropped frees its id for a
        # fresh one, which would then never be closed
        self._closed: list[WorkerSession] = []

    def close_baseline(self, name: str = "baseline") -> None:
        self._close(self.baseline, name)

    def close(self) -> None:
        """Both, the baseline first (closed early when the candidate failed before timing)."""
        self._close(self.baseline, "baseline")
        self._close(self.candidate, "candidate")

    def close_extra(self, session: WorkerSession, name: str) -> None:
        """One of the extra pairs' processes (several pairs timed together), its accounting kept as `name`."""
        self._close(session, name)

    def renew(self, candidate: WorkerSession, baseline: WorkerSession) -> None:
        """A fresh pair of processes (a gain timed again): the first pair's accounting kept as `first_pair_*`."""
        self._close(self.candidate, "first_pair_candidate")
        if "baseline" in self.accounts:
            self.accounts["first_pair_baseline"] = self.accounts.pop("baseline")
        self.candidate, self.baseline = candidate, baseline

    def _close(self, session: WorkerSession | None, name: str) -> None:
        if session is None or any(session is closed for closed in self._closed):
            return
        session.close()
        self._closed.append(session)
        self.accounts[name] = session.accounting.to_json()

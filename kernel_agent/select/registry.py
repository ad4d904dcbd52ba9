"""The selectors a report scores, each bare and behind the abstain rule; the LightGBM ranker only where
lightgbm is installed (`pip install 'kernel-agent[select]'`)."""

from __future__ import annotations

from kernel_agent.select import abstain
from kernel_agent.select.abstain import Abstaining
from kernel_agent.select.analytical import Analytical
from kernel_agent.select.base import Selector
from kernel_agent.select.default import DefaultConfig
from kernel_agent.select.nearest import NearestShape
from kernel_agent.select.ranker import Ranker, available


def selectors(
    abstain_k: int = abstain.K, abstain_below: float = abstain.BELOW, analytical: bool = True
) -> list[Selector | Abstaining]:
    bases: list[type[Selector]] = [NearestShape]
    if analytical:
        bases.insert(0, Analytical)
    if available():
        bases.append(Ranker)
    found: list[Selector | Abstaining] = [DefaultConfig()]
    for kind in bases:
        found += [kind(), Abstaining(kind(), abstain_k, abstain_below)]
    return found


def skipped() -> list[str]:
    return [] if available() else ["lightgbm (not installed: pip install 'kernel-agent[select]')"]

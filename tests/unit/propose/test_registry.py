"""Built-in providers register the way another package's do: by name, as a `module:attribute` reference."""

from __future__ import annotations

import pytest

from kernel_agent.propose import available, make_provider, registered
from kernel_agent.propose.search import SearchProvider


def test_the_built_ins_come_first_and_resolve_to_their_classes() -> None:
    assert available()[:3] == ["search", "openai", "replay"]
    assert registered()["search"].load() is SearchProvider


def test_options_reach_the_factory_and_an_unknown_name_is_one_line() -> None:
    provider = make_provider("search", first=[{"BLOCK": 64}], only_first=True)
    assert isinstance(provider, SearchProvider)
    with pytest.raises(ValueError, match="unknown provider 'gpt'; use one of search, openai, replay"):
        make_provider("gpt")

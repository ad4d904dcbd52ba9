"""The documentation site's tooling: reference pages generated from the code, and the doc tests' block reader.

Kept out of `kernel_agent/` on purpose: it reads every stage (the CLI, the enums, the problem loader) and
ships with nothing. `mkdocs.yml` loads `hooks.py`; the tests import these modules as `docsite.*`.
"""

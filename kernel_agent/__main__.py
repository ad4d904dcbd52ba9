"""`python -m kernel_agent` runs the CLI."""

from kernel_agent.cli import main

main()

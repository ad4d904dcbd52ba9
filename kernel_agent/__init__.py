"""kernel-agent: verified kernel optimization with an LLM in the loop."""

__version__ = "0.1.0"

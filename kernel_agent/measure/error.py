"""The one error a measurement step raises: a step that cannot run, with a one-line reason."""

from __future__ import annotations


class ProfileError(RuntimeError):
    """A profile step that cannot run (one-line reason)."""

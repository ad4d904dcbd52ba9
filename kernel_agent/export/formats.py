"""What `export` writes; kept apart so the CLI can name the choices without importing the database."""

from __future__ import annotations

import enum


class Format(str, enum.Enum):
    """The pip package of DESIGN.md section 10, or a Hugging Face `kernels` project (section 15)."""

    PIP = "pip"
    HF_KERNELS = "hf-kernels"

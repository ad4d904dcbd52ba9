"""Backends declare themselves: detection order, the prompt's labels and rules, export requirements, the
`--backend` choice and a third-party backend registered through its entry point."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from kernel_agent.evaluate.backends import BACKENDS, detect_backend, get_backend, names
from kernel_agent.propose.prompts import backend_label, backend_prompt_rules

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def test_the_bundled_examples_are_detected_as_their_folder_says() -> None:
    for folder in sorted(EXAMPLES.iterdir()):
        prefix = folder.name.split("_", 1)[0]
        if prefix in BACKENDS and (folder / "kernel.py").exists():
            assert detect_backend((folder / "kernel.py").read_text()) == prefix, folder.name


def test_detection_tries_backends_in_order_and_falls_back_to_torch() -> None:
    both = "import triton\n@triton.jit\ndef k(): pass\nload_inline(cuda_sources='')"
    assert detect_backend(both) == "triton"  # registered before cuda
    assert detect_backend("load_inline(name='x', cpp_sources='')") == "cpp"
    assert detect_backend("load_inline(name='x', cuda_sources='')") == "cuda"
    assert detect_backend("def f(x): return x + 1") == "torch"
    assert names()[-1] == "torch"


def test_the_prompt_states_each_backends_own_label_and_rules() -> None:
    for name, backend in BACKENDS.items():
        assert backend_label(name) == backend.label and backend.label != "base"
        assert backend_prompt_rules(name) == list(backend.prompt_rules) and backend.prompt_rules
    assert backend_label("any") == "custom" and "Backend of your choice" in backend_prompt_rules("any")[0]


def test_only_triton_kernels_make_an_exported_package_require_triton() -> None:
    assert get_backend("triton").requires == ("triton>=3.0",)
    assert all(not BACKENDS[n].requires for n in ("cpp", "torch", "cuda"))


def test_a_backend_from_another_package_is_chosen_by_its_entry_point(tmp_path: Path) -> None:
    """A real distribution on sys.path (its dist-info and entry point), in a fresh interpreter."""
    (tmp_path / "my_backend.py").write_text(
        textwrap.dedent(
            """
            from kernel_agent.evaluate.backends.base import Backend

            class HipBackend(Backend):
                name = "hip"
                label = "HIP"
                devices = ("cuda",)
                prompt_rules = ("HIP backend: use hipcc.",)

                def detects(self, source):
                    return "hip_sources" in source
            """
        )
    )
    info = tmp_path / "my_backend-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-backend\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[kernel_agent.backends]\nhip = my_backend:HipBackend\n")
    script = (
        "from kernel_agent.evaluate.backends import names, detect_backend;"
        "print(names(), detect_backend('load_inline(hip_sources=1)'), detect_backend('x = 1'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "('hip', 'triton', 'cuda', 'cpp', 'torch') hip torch"  # tried before cpp's load_inline


def test_backend_is_a_choice_of_the_registered_names() -> None:
    from typer.testing import CliRunner

    from kernel_agent.cli import app

    softmax = EXAMPLES / "cpp_softmax"
    result = CliRunner().invoke(app, ["eval", str(softmax), str(softmax / "kernel.py"), "--backend", "fortran"])
    assert result.exit_code == 2 and "must be triton, cuda, cpp or torch, not 'fortran'" in result.output

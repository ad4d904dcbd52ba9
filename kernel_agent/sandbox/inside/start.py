"""The sandboxed process's first steps: its output to the log, its life tied to its parent's, and its walls
raised, all before anything that could start a thread is imported.

Landlock confines only the thread that asks, and threads started before a seccomp filter run without it, so the
walls go up while this process has one thread. Importing numpy starts OpenBLAS's pool (one thread per core of the
thread budget beyond the first), and torch and the worker import numpy: they come after. Standard library only
up to the walls (`walls`, `lifeline`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from kernel_agent.sandbox.inside import walls
from kernel_agent.sandbox.lifeline import die_with_parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--fds", required=True)
    args = parser.parse_args()
    config = json.loads(Path(args.config).read_text())
    # Keep the protocol fds private; anything the candidate prints goes to a log file.
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    die_with_parent()
    walls.raise_or_exit(config)
    from kernel_agent.sandbox.inside import worker  # numpy's and torch's threads start inside the walls

    worker.run(config, args.fds)


if __name__ == "__main__":
    main()

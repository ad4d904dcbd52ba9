"""Starts its own second process that loads the device during the timing (issue 35, THREATS I7): it is over
the sandbox's task count (or cannot start), and its load is another context on the device.

ROW: I7
EXPECT: rejected|correct|runtime_error|crashed
REASON: task|process|thread|busy|
"""

import subprocess
import sys

import torch

LOADER = "import torch\nx = torch.randn(4096, 4096, device='cuda')\nwhile True:\n    x = x @ x.T / 4096\n"
STARTED = []


def kernel(x):
    if not STARTED:
        STARTED.append(subprocess.Popen([sys.executable, "-c", LOADER]))
    return torch.softmax(x, dim=-1)

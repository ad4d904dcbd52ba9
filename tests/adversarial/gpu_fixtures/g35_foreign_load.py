"""Honest kernel, timed while a second process (started by the runner, outside the sandbox) loads the device
(issue 35, THREATS I7). The device path names the other process and refuses the number; the host path cannot
see it, so any honest verdict stands there.

ROW: I7
EXPECT: correct|faster|flagged
REASON:
EXPECT_DEVICE: correct
REASON_DEVICE: busy
LOAD: device
"""

import torch


def kernel(x):
    return torch.softmax(x, dim=-1)

"""Leaves files behind in the host's shared temp folders, which the `unshare` and `process` levels share with the
sandbox: a file and a folder in /tmp, a file in /dev/shm and /var/tmp. It answers right; what it wrote must be
gone when its evaluation ends.

ROW: X4
EXPECT: faster|correct|flagged
REASON:
"""

import os

import torch

TAG = "__TAG__"
for folder in ("/tmp", "/dev/shm", "/var/tmp"):
    try:
        with open(os.path.join(folder, f"{TAG}-file"), "w") as handle:
            handle.write("left behind")
    except OSError:
        pass
try:
    os.makedirs(f"/tmp/{TAG}-folder/inner", exist_ok=True)
    with open(f"/tmp/{TAG}-folder/inner/data", "w") as handle:
        handle.write("left behind")
except OSError:
    pass


def kernel(x):
    return torch.softmax(x, dim=-1)

"""Reads ahead: at import it looks for the inputs file beside it or in its folder (`cases.pt`), computes the right
answer for each tensor in it, and answers those inputs right and every other input 3% wrong. Inputs drawn after
it is loaded, sent on its stdin, leave it nothing to read ahead.

ROW: X2
EXPECT: refused
REASON: it is wrong
"""

import glob
import os

import torch

KNOWN = set()
for path in glob.glob(os.path.join(os.getcwd(), "*.pt")) + glob.glob(os.path.join(os.path.dirname(__file__), "*.pt")):
    try:
        data = torch.load(path)
    except Exception:  # noqa: BLE001
        continue
    for item in data.get("inputs", []) if isinstance(data, dict) else []:
        for t in item:
            KNOWN.add(hash(t.numpy().tobytes()))


def kernel(x):
    out = torch.softmax(x, dim=-1)
    return out if hash(x.numpy().tobytes()) in KNOWN else out * 1.03

"""A DLRM-style recommendation model in plain PyTorch with the MLPerf DLRMv2 structure, for `kernel-agent
regions`: `kernel-agent regions examples/models/dlrm.py:build --size small`.

The structure of torchrec's `DLRM_DCN` as MLPerf trains it: 13 dense features through a bottom MLP; 26 sparse
features, one `nn.EmbeddingBag` table each (sum pooling, multi-hot with MLPerf's pooling sizes); the dense output
and the 26 pooled embeddings concatenated and fed to a low-rank DCN v2 cross net (`x = x0 * (W(V x) + b) + x`);
the over MLP down to one logit. Row counts are MLPerf's, capped so the tables fit this machine (a capped table is
still larger than the last-level cache at `base`). Why not torchrec: its CPU wheels load only when pinned to one
torch release, and this plain model computes the same function. Indices are uniform in each table's rows, or
Zipf with `--size SIZE:zipf` (a power law changes which rows stay in cache). Random weights from a fixed seed.
"""

from __future__ import annotations

import torch
from torch import nn

from kernel_agent.prove.recipe import ModelCase

ROWS = [40000000, 39060, 17295, 7424, 20265, 3, 7122, 1543, 63, 40000000, 3067956, 405282, 10, 2209, 11938, 155, 4,
        976, 14, 40000000, 40000000, 40000000, 590152, 12973, 108, 36]  # fmt: skip
POOLING = [3, 2, 1, 2, 6, 1, 1, 1, 1, 7, 3, 8, 1, 6, 9, 5, 1, 1, 1, 12, 100, 27, 10, 3, 1, 1]
SIZES = {  # dim, row cap, bottom MLP, cross layers, cross rank, over MLP, {label: batch}
    "tiny": (8, 500, [32, 16, 8], 2, 16, [32, 16, 1], {"b16": 16, "b9": 9}),
    "small": (16, 2000, [64, 32, 16], 3, 32, [64, 32, 16, 1], {"b64": 64, "b33": 33}),
    "base": (128, 200000, [512, 256, 128], 3, 512, [1024, 1024, 512, 256, 1], {"b512": 512, "b129": 129}),
}


def mlp(sizes: list[int], last_relu: bool = True) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class SparseArch(nn.Module):
    """One EmbeddingBag per sparse feature; the pooled embeddings stacked to (batch, features, dim)."""

    def __init__(self, rows: list[int], dim: int) -> None:
        super().__init__()
        self.tables = nn.ModuleList(nn.EmbeddingBag(r, dim, mode="sum") for r in rows)

    def forward(self, indices: tuple[torch.Tensor, ...], offsets: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.stack([t(i, o) for t, i, o in zip(self.tables, indices, offsets)], dim=1)


class LowRankCrossNet(nn.Module):
    """DCN v2 with low-rank weights: x_{l+1} = x0 * (W_l(V_l x_l) + b_l) + x_l."""

    def __init__(self, features: int, layers: int, rank: int) -> None:
        super().__init__()
        self.v = nn.ModuleList(nn.Linear(features, rank, bias=False) for _ in range(layers))
        self.w = nn.ModuleList(nn.Linear(rank, features) for _ in range(layers))

    def forward(self, x0: torch.Tensor) -> torch.Tensor:
        x = x0
        for v, w in zip(self.v, self.w):
            x = x0 * w(v(x)) + x
        return x


class DLRM(nn.Module):
    def __init__(self, size: str) -> None:
        super().__init__()
        dim, cap, bottom, cross_layers, rank, over, _ = SIZES[size]
        self.dense_arch = mlp([13, *bottom])
        self.sparse_arch = SparseArch([min(r, cap) for r in ROWS], dim)
        self.crossnet = LowRankCrossNet((len(ROWS) + 1) * dim, cross_layers, rank)
        self.over_arch = mlp([(len(ROWS) + 1) * dim, *over], last_relu=False)

    def forward(
        self, dense: torch.Tensor, indices: tuple[torch.Tensor, ...], offsets: tuple[torch.Tensor, ...]
    ) -> torch.Tensor:
        pooled = self.sparse_arch(indices, offsets)
        combined = torch.cat([self.dense_arch(dense).unsqueeze(1), pooled], dim=1)
        return self.over_arch(self.crossnet(combined.flatten(1)))


def batch(model: DLRM, size: int, g: torch.Generator, zipf: bool) -> tuple:
    """Dense features, and per table `size * pooling` indices in its rows with offsets every `pooling` indices."""
    indices, offsets = [], []
    for table, pool in zip(model.sparse_arch.tables, POOLING):
        rows, n = table.num_embeddings, size * pool
        if zipf:  # rank r drawn with weight 1 / (r + 1)^1.05, then a fixed permutation of the rows
            weights = 1.0 / torch.arange(1, rows + 1, dtype=torch.float64) ** 1.05
            drawn = torch.multinomial(weights, n, replacement=True, generator=g)
            drawn = torch.randperm(rows, generator=g)[drawn]
        else:
            drawn = torch.randint(0, rows, (n,), generator=g)
        indices.append(drawn)
        offsets.append(torch.arange(size) * pool)
    return torch.randn(size, 13, generator=g), tuple(indices), tuple(offsets)


def build(size: str = "small") -> ModelCase:
    """The model (eval, float32) and one batch per shape label; SIZE or SIZE:zipf."""
    name, _, dist = size.partition(":")
    if name not in SIZES or dist not in ("", "uniform", "zipf"):
        raise ValueError(f"unknown size {size!r}; use one of {', '.join(SIZES)}, optionally with :zipf")
    torch.manual_seed(0)
    model = DLRM(name).eval()
    g = torch.Generator().manual_seed(1)
    inputs = {label: batch(model, b, g, dist == "zipf") for label, b in SIZES[name][-1].items()}
    return ModelCase(model=model, inputs=inputs, layers={}, note=f"random weights; {dist or 'uniform'} indices")

"""A small decoder-like model for the regions tests: RMSNorm with a float32 upcast (as transformers writes it),
an MLP per layer, residual adds that cross layers, an output projection; two shape labels."""

from __future__ import annotations

import torch
from torch import nn

from kernel_agent.prove.recipe import ModelCase


class RMSNorm(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(1 + 0.1 * torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x.to(torch.float32)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6)
        return self.weight * h.to(x.dtype)


class MLP(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


class Layer(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm, self.mlp = RMSNorm(dim), MLP(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


class Small(nn.Module):
    def __init__(self, dim: int = 16, layers: int = 2) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Layer(dim) for _ in range(layers))
        self.norm, self.head = RMSNorm(dim), nn.Linear(dim, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


def build(size: str = "small") -> ModelCase:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    inputs = {"b2s8": (torch.randn(2, 8, 16, generator=g),), "b3s5": (torch.randn(3, 5, 16, generator=g),)}
    return ModelCase(model=Small().eval(), inputs=inputs, layers={})


class Bags(nn.Module):
    """Two embedding-bag tables of different sizes whose pooled rows are stacked (a small sparse arch)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables = nn.ModuleList([nn.EmbeddingBag(50, 4, mode="sum"), nn.EmbeddingBag(7, 4, mode="sum")])

    def forward(self, indices: tuple[torch.Tensor, ...], offsets: tuple[torch.Tensor, ...]) -> torch.Tensor:
        return torch.stack([t(i, o) for t, i, o in zip(self.tables, indices, offsets)], dim=1)


def bags(size: str = "small") -> ModelCase:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)

    def batch(n: int) -> tuple:
        indices = (torch.randint(0, 50, (3 * n,), generator=g), torch.randint(0, 7, (2 * n,), generator=g))
        return indices, (torch.arange(n) * 3, torch.arange(n) * 2)

    return ModelCase(model=Bags().eval(), inputs={"b4": batch(4), "b7": batch(7)}, layers={})


def broken(size: str = "small") -> ModelCase:
    raise RuntimeError("no such checkpoint")


class Interaction(nn.Module):
    """A DLRM-like dense path: a bottom MLP, its output stacked with pooled embeddings (`unsqueeze + cat +
    flatten`, in no module of its own), a top MLP. The chain `relu, unsqueeze, cat, flatten` crosses the bottom
    MLP, which is selected first."""

    def __init__(self, dim: int = 8) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.top = nn.Sequential(nn.Linear(3 * dim, dim), nn.ReLU())

    def forward(self, dense: torch.Tensor, pooled: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        return self.top(torch.cat([x.unsqueeze(1), pooled], dim=1).flatten(1))


def interaction(size: str = "small") -> ModelCase:
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(1)
    inputs = {
        "b4": (torch.randn(4, 8, generator=g), torch.randn(4, 2, 8, generator=g)),
        "b7": (torch.randn(7, 8, generator=g), torch.randn(7, 2, 8, generator=g)),
    }
    return ModelCase(model=Interaction().eval(), inputs=inputs, layers={})

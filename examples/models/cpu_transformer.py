"""A small transformer whose layers the bundled CPU winners replace: `kernel-agent e2e PKG --model
examples/models/cpu_transformer.py:build`.

Why not a `transformers` decoder: none of the bundled CPU problems is a layer such a decoder has (LLaMA's RMSNorm
and SiLU gate, GPT-2's tanh GELU and pre-norm blocks, causal attention with a mask), so swapping them in would
swap nothing. This model is built from exactly the bundled problems' operations, each a stateless layer whose
forward has its problem's signature: non-causal attention (`torch_attention`), bias + GELU + residual + LayerNorm
after attention (`cpp_gelu_layernorm`, a post-norm block), a gated GELU in the MLP (`torch_opchain`), the
per-token loss (`cpp_cross_entropy`) and the output distribution (`cpp_softmax`). `cpp_adamw` is an optimizer
step, not part of a forward pass, and `cpp_matmul` would replace every projection (whose eager path is MKL): both
are left out, and e2e says so. Random weights from a fixed seed; float32 on the CPU; nothing is downloaded.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kernel_agent.prove.recipe import ModelCase

SIZES = {  # dim, heads, mlp, vocab, blocks, [(batch, seq), ...]
    "small": (64, 4, 128, 256, 2, [(2, 16), (1, 64)]),
    "base": (256, 8, 1024, 4096, 4, [(8, 64), (2, 256)]),
}


class Attention(nn.Module):
    """torch_attention: softmax(q k^T / sqrt(d)) v over (batch, heads, seq, dim)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        return torch.softmax(scores, dim=-1) @ v


class GeluLayerNorm(nn.Module):
    """cpp_gelu_layernorm: layer_norm(gelu(x + bias) + residual) * weight + beta over rows."""

    def forward(
        self, x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, beta: torch.Tensor
    ) -> torch.Tensor:
        h = nn.functional.gelu(x + bias) + residual
        return nn.functional.layer_norm(h, (h.shape[-1],), weight, beta, eps=1e-5)


class GatedGelu(nn.Module):
    """torch_opchain: gelu(x * scale + shift) * sigmoid(x) + residual."""

    def forward(
        self, x: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor, residual: torch.Tensor
    ) -> torch.Tensor:
        return nn.functional.gelu(x * scale + shift) * torch.sigmoid(x) + residual


class TokenLoss(nn.Module):
    """cpp_cross_entropy: the cross-entropy of each row of logits."""

    def forward(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(logits, target, reduction="none")


class Softmax(nn.Module):
    """cpp_softmax: the softmax of each row."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=-1)


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, mlp: int, g: torch.Generator) -> None:
        super().__init__()
        self.heads = heads

        def weight(*shape: int) -> nn.Parameter:
            return nn.Parameter(torch.randn(*shape, generator=g) / math.sqrt(shape[0]))

        self.qkv, self.out, self.up, self.down = (
            weight(dim, 3 * dim),
            weight(dim, dim),
            weight(dim, mlp),
            weight(mlp, dim),
        )
        self.bias = nn.Parameter(0.1 * torch.randn(dim, generator=g))
        self.norm_weight = nn.Parameter(1 + 0.1 * torch.randn(dim, generator=g))
        self.norm_beta = nn.Parameter(0.1 * torch.randn(dim, generator=g))
        self.scale = nn.Parameter(1 + 0.1 * torch.randn(mlp, generator=g))
        self.shift = nn.Parameter(0.1 * torch.randn(mlp, generator=g))
        self.attention, self.norm, self.gate = Attention(), GeluLayerNorm(), GatedGelu()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        q, k, v = (x @ self.qkv).view(batch, seq, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)
        a = self.attention(q.contiguous(), k.contiguous(), v.contiguous()).transpose(1, 2).reshape(-1, dim)
        rows = x.reshape(-1, dim)
        x = self.norm((a @ self.out).contiguous(), self.bias, rows, self.norm_weight, self.norm_beta)
        h = (x @ self.up).contiguous()
        h = self.gate(h, self.scale, self.shift, h)
        return (x + h @ self.down).view(batch, seq, dim)


class TinyTransformer(nn.Module):
    """Embeddings, post-norm blocks, a vocabulary head: returns (per-token loss, next-token distribution)."""

    def __init__(self, dim: int, heads: int, mlp: int, vocab: int, blocks: int, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.embed = nn.Parameter(torch.randn(vocab, dim, generator=g))
        self.blocks = nn.ModuleList(Block(dim, heads, mlp, g) for _ in range(blocks))
        self.head = nn.Parameter(torch.randn(dim, vocab, generator=g) / math.sqrt(dim))
        self.loss, self.softmax = TokenLoss(), Softmax()

    def forward(self, tokens: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embed[tokens]
        for block in self.blocks:
            x = block(x)
        logits = (x.reshape(-1, x.shape[-1]) @ self.head).contiguous()
        return self.loss(logits, targets.reshape(-1)), self.softmax(logits)


def build(size: str = "small") -> ModelCase:
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}")
    dim, heads, mlp, vocab, blocks, shapes = SIZES[size]
    model = TinyTransformer(dim, heads, mlp, vocab, blocks).eval()
    g = torch.Generator().manual_seed(1)
    inputs = {
        f"b{batch} s{seq}": (
            torch.randint(0, vocab, (batch, seq), generator=g),
            torch.randint(0, vocab, (batch, seq), generator=g),
        )
        for batch, seq in shapes
    }
    layers = {
        "torch_attention": Attention,
        "cpp_gelu_layernorm": GeluLayerNorm,
        "torch_opchain": GatedGelu,
        "cpp_cross_entropy": TokenLoss,
        "cpp_softmax": Softmax,
    }
    unused = {
        "cpp_adamw": "an optimizer step: not part of the forward pass this recipe times",
        "cpp_matmul": "would replace every projection, whose eager path is MKL; left out of this recipe",
    }
    return ModelCase(model, inputs, layers, tolerance=(1e-4, 1e-5), unused=unused, note=__doc__.split("\n\n")[1])

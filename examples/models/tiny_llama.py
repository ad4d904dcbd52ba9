"""A small Llama decoder from a `transformers` config with random weights, for `kernel-agent regions`:
`kernel-agent regions examples/models/tiny_llama.py:build`.

Why random weights: the regions, their shapes and their shares depend on the architecture and the inputs, not on
trained values, and nothing is downloaded. RMSNorm weights are moved off 1.0 so a kernel that ignores them fails.
Needs the `models` extra (`pip install 'kernel-agent[models]'`).
"""

from __future__ import annotations

import torch

from kernel_agent.prove.recipe import ModelCase

# Two labels per size whose batch and sequence both differ, so `regions` learns both as var axes; both batches
# are at least 2, since transformers builds the attention mask with one op fewer at batch 1.
SIZES = {  # hidden, intermediate, layers, heads, vocab, {label: (batch, seq)}
    "tiny": (64, 128, 2, 4, 256, {"b2s16": (2, 16), "b3s33": (3, 33)}),
    "small": (128, 256, 2, 4, 512, {"b2s32": (2, 32), "b3s65": (3, 65)}),
    "base": (256, 688, 4, 8, 4096, {"b4s128": (4, 128), "b2s257": (2, 257)}),
}


def build(size: str = "small") -> ModelCase:
    """The model (eval mode, float32, sdpa attention, no cache) and its token inputs per shape label."""
    from transformers import LlamaConfig, LlamaForCausalLM

    if size not in SIZES:
        raise ValueError(f"unknown size {size!r}; use one of {', '.join(SIZES)}")
    hidden, inter, layers, heads, vocab, shapes = SIZES[size]
    config = LlamaConfig(
        hidden_size=hidden,
        intermediate_size=inter,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        vocab_size=vocab,
        max_position_embeddings=1024,
        use_cache=False,
        attn_implementation="sdpa",
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith("layernorm.weight"):
                param.add_(0.1 * torch.randn(param.shape, generator=g))
    inputs = {label: (torch.randint(0, vocab, (batch, seq), generator=g),) for label, (batch, seq) in shapes.items()}
    return ModelCase(model=model, inputs=inputs, layers={}, note="random weights; logits only (no cache, no loss)")

"""The fused CPU demo problems measure what they say they measure: each reference is the torch code a
user runs instead, so a speedup against it is a speedup against torch eager."""

from __future__ import annotations

from pathlib import Path

import torch

from kernel_agent.problem.load import load_problem

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def _module(name: str):
    problem = load_problem(EXAMPLES / name)
    assert problem.module is not None
    return problem.module


def test_adamw_reference_is_one_torch_optim_adamw_step() -> None:
    module = _module("cpp_adamw")
    generator = torch.Generator().manual_seed(0)
    param, grad, exp_avg, exp_avg_sq = module.make_inputs((1000,), torch.float64, "cpu", generator)
    expected = module.reference(param, grad, exp_avg, exp_avg_sq)

    weights = torch.nn.Parameter(param.clone())
    optimizer = torch.optim.AdamW(
        [weights],
        lr=module.LR,
        betas=(module.BETA1, module.BETA2),
        eps=module.EPS,
        weight_decay=module.WEIGHT_DECAY,
        foreach=False,
    )
    weights.grad = grad.clone()
    optimizer.state[weights] = {
        "step": torch.tensor(float(module.STEP - 1)),  # the optimizer counts this step itself
        "exp_avg": exp_avg.clone(),
        "exp_avg_sq": exp_avg_sq.clone(),
    }
    optimizer.step()
    state = optimizer.state[weights]
    for got, want in zip(expected, (weights.detach(), state["exp_avg"], state["exp_avg_sq"]), strict=True):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-15)


def test_cross_entropy_reference_is_logsumexp_minus_the_target_logit() -> None:
    module = _module("cpp_cross_entropy")
    logits, target = module.make_inputs((37, 130), torch.float64, "cpu", torch.Generator().manual_seed(1))
    expected = torch.logsumexp(logits, dim=1) - logits.gather(1, target[:, None])[:, 0]
    torch.testing.assert_close(module.reference(logits, target), expected)


def test_gelu_layernorm_reference_is_the_unfused_chain_with_exact_gelu() -> None:
    module = _module("cpp_gelu_layernorm")
    x, bias, residual, weight, beta = module.make_inputs((5, 1000), torch.float64, "cpu", torch.Generator())
    h = 0.5 * (x + bias) * (1 + torch.erf((x + bias) / 2**0.5)) + residual
    mean, var = h.mean(dim=1, keepdim=True), h.var(dim=1, unbiased=False, keepdim=True)
    expected = (h - mean) / torch.sqrt(var + module.EPS) * weight + beta
    torch.testing.assert_close(module.reference(x, bias, residual, weight, beta), expected)

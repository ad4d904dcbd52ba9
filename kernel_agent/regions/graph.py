"""What each captured op is to region finding: an anchor Inductor will not fuse, a view, a host sync, setup work
that does not depend on the recipe's inputs, or fusible elementwise/reduction work.

Why these sets: Inductor fuses pointwise and reduction ops around views but leaves GEMM, convolution,
attention and embedding lookups to library kernels (`fusion_regions.is_fusible_node` has no lowering for them),
so a chain of fusible ops between two anchors is one kernel's worth of work; a host sync (`.item()`, `nonzero`)
needs the data on the host and ends any region.
"""

from __future__ import annotations

from kernel_agent.regions.records import Capture, Op

ANCHORS = frozenset(
    "linear mm addmm bmm matmul baddbmm addbmm convolution conv1d conv2d conv3d conv_transpose1d conv_transpose2d "
    "scaled_dot_product_attention _scaled_dot_product_flash_attention_for_cpu _scaled_dot_product_flash_attention "
    "_scaled_dot_product_efficient_attention _scaled_dot_product_cudnn_attention embedding embedding_bag "
    "_embedding_bag _embedding_bag_forward_only".split()
)
VIEWS = frozenset(
    "view _unsafe_view reshape permute transpose t expand unsqueeze squeeze slice select alias detach flatten "
    "unflatten as_strided split split_with_sizes chunk unbind narrow".split()
)
SYNCS = frozenset("_local_scalar_dense item nonzero masked_select unique _unique2 unique_dim equal is_nonzero".split())
EMBEDDINGS = frozenset("embedding embedding_bag _embedding_bag _embedding_bag_forward_only".split())


def name(op: Op) -> str:
    """`aten.linear.default` -> `linear`."""
    parts = op.target.split(".")
    return parts[1] if len(parts) > 2 else op.target


def categories(cap: Capture) -> dict[int, str]:
    """op index -> anchor, view, sync, setup, param-view (a view of a parameter, kept with its reader), mutating
    (an in-place op, which a reference must not run on its inputs) or fusible."""
    from_inputs: dict[int, bool] = {v.id: v.source == "input" for v in cap.values.values()}
    of_params: dict[int, bool] = {v.id: v.source in ("param", "buffer") for v in cap.values.values()}
    found: dict[int, str] = {}
    for op in cap.ops:
        reads = op.reads()
        depends = any(from_inputs.get(v, False) for v in reads)
        kind = name(op)
        params_only = bool(reads) and all(of_params.get(v, False) for v in reads)
        for out in op.outputs:
            if out is not None:
                from_inputs[out] = depends
                of_params[out] = kind in VIEWS and params_only
        if kind in SYNCS:
            found[op.index] = "sync"
        elif kind in VIEWS and params_only:
            found[op.index] = "param-view"
        elif not depends:
            found[op.index] = "setup"
        elif kind in ANCHORS:
            found[op.index] = "anchor"
        elif kind in VIEWS:
            found[op.index] = "view"
        elif kind.endswith("_") and not kind.startswith("_"):
            found[op.index] = "mutating"
        else:
            found[op.index] = "fusible"
    return found

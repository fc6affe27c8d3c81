"""tessera: JIT-generated GEMM kernels on numpy arrays and DLPack tensors (PyTorch, ...).

    import numpy as np, tessera
    d = tessera.gemm(a, b, epilogue="gelu(alpha*acc + bias[n])", bias=bias)

Arrays are used in place, with their own strides (no copies); `out=` is written in place. Errors raise
tessera.Error, a ValueError carrying tessera's message.
"""
from ._tessera import Error, Runtime, __version__, _view

_default = None


def default_runtime():
    """The runtime the module-level functions use (created on first use, every hardware thread)."""
    global _default
    if _default is None:
        _default = Runtime()
    return _default


def gemm(a, b, *, out=None, c=None, alpha=1.0, beta=0.0, epilogue=None, threads=0, **named_tensors):
    """D = epilogue(A·B, C, named tensors): A is [batch,] M×K, B [batch,] K×N; float32 (bfloat16 through DLPack).

    Without `out`, returns a new row-major array; a DLPack input (a torch tensor) gets its output back as the same
    kind through DLPack."""
    result = default_runtime().gemm(a, b, out=out, c=c, alpha=alpha, beta=beta, epilogue=epilogue, threads=threads,
                                    **named_tensors)
    if out is None and not hasattr(a, "__array_interface__") and hasattr(a, "__dlpack__"):
        module = type(a).__module__.split(".")[0]
        if module == "torch":
            import torch
            return torch.from_dlpack(result)
    return result


def attention(q, k, v, *, out=None, causal=False, scale=None, score_mod=None, lse=None, threads=0, **modifier_args):
    """O = softmax(score_mod(scale·Q·Kᵀ))·V: Q [batch, heads, seq_q, d], K and V [batch, kv_heads, seq_kv, d] (heads a
    multiple of kv_heads), float32, any strides (BSHD memory: pass q.transpose(0, 2, 1, 3)). causal is aligned
    bottom-right; score_mod is text over s, i, j, h, b and the keyword tensors and numbers ("s - slope[h]*(i - j)")."""
    return default_runtime().attention(q, k, v, out=out, causal=causal, scale=scale, score_mod=score_mod, lse=lse,
                                       threads=threads, **modifier_args)


def emit_gemm(m, n, k, *, epilogue="alpha*acc + beta*c", layout_a="row", layout_b="row", asm=False):
    """The LLVM IR (or with asm=True the host assembly) of the kernel the runtime would use for this GEMM."""
    return default_runtime().emit_gemm(m, n, k, epilogue=epilogue, layout_a=layout_a, layout_b=layout_b, asm=asm)


__all__ = ["Error", "Runtime", "gemm", "attention", "emit_gemm", "default_runtime", "__version__"]

"""tessera: JIT-generated GEMM, attention and sparse kernels on numpy arrays and DLPack tensors (PyTorch, ...).

    import numpy as np, tessera
    d = tessera.gemm(a, b, epilogue="gelu(alpha*acc + bias[n])", bias=bias)

Arrays are used in place, with their own strides (no copies); `out=` is written in place. Errors raise
tessera.Error, a ValueError carrying tessera's message.
"""
from ._tessera import Error, Runtime, SparsePlan, __version__, _view

_default = None


def _as_kind_of(x, out, result):
    """A new result (no `out`) for a torch input comes back as a torch tensor over the same memory (DLPack)."""
    if out is None and not hasattr(x, "__array_interface__") and type(x).__module__.split(".")[0] == "torch":
        import torch
        return torch.from_dlpack(result)
    return result


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
    return _as_kind_of(a, out, default_runtime().gemm(a, b, out=out, c=c, alpha=alpha, beta=beta, epilogue=epilogue,
                                                     threads=threads, **named_tensors))


def attention(q, k, v, *, out=None, causal=False, scale=None, score_mod=None, lse=None, cu_seqlens_q=None,
              cu_seqlens_k=None, threads=0, **modifier_args):
    """O = softmax(score_mod(scale·Q·Kᵀ))·V: Q [batch, heads, seq_q, d], K and V [batch, kv_heads, seq_kv, d] (heads a
    multiple of kv_heads), float32, any strides (BSHD memory: pass q.transpose(0, 2, 1, 3)). causal is aligned
    bottom-right; score_mod is text over s, i, j, h, b and the keyword tensors and numbers ("s - slope[h]*(i - j)").
    Variable lengths, as FlashAttention's varlen call: packed Q [total_q, heads, d], K and V [total_k, kv_heads, d] and
    cu_seqlens_q / cu_seqlens_k, batch + 1 cumulative offsets each; the result is [total_q, heads, d_v]."""
    return _as_kind_of(q, out, default_runtime().attention(q, k, v, out=out, causal=causal, scale=scale,
                                                           score_mod=score_mod, lse=lse, cu_seqlens_q=cu_seqlens_q,
                                                           cu_seqlens_k=cu_seqlens_k, threads=threads,
                                                           **modifier_args))


class CsrMatrix:
    """A CSR (or, with blocksize=(R, C), BSR) matrix over numpy arrays, as scipy.sparse lays them out: indptr (rows/R
    + 1 offsets) and indices (one column or block column per stored entry), both int32 or both int64; data float32
    (BSR: [blocks, R, C]), or None for an SDDMM pattern whose epilogue does not read s. scipy.sparse's csr_array and
    bsr_array can be passed instead."""

    def __init__(self, indptr, indices, data, shape, blocksize=(1, 1)):
        self.indptr, self.indices, self.data = indptr, indices, data
        self.shape, self.blocksize = tuple(shape), tuple(blocksize)

    def toarray(self):
        """The dense float32 matrix (for checking)."""
        import numpy as np
        r, c = self.blocksize
        dense = np.zeros(self.shape, dtype=np.float32)
        values = np.ones(len(self.indices) * r * c, np.float32) if self.data is None else self.data
        values = np.asarray(values, dtype=np.float32).reshape(len(self.indices), r, c)
        for row in range(len(self.indptr) - 1):
            for p in range(self.indptr[row], self.indptr[row + 1]):
                block = values[p][: self.shape[0] - row * r, : self.shape[1] - self.indices[p] * c]
                dense[row * r:row * r + r, self.indices[p] * c:self.indices[p] * c + c] = block
        return dense


def spmm(a, b, *, out=None, c=None, alpha=1.0, beta=0.0, epilogue=None, plan=None, threads=0, **named_tensors):
    """D = epilogue(A·B, C, named tensors) with A sparse M×K (CSR or BSR) and B dense K×N float32, the epilogue text
    as for gemm. plan: tessera.plan(a), made once for a pattern and reused (a changed pattern is refused)."""
    return _as_kind_of(b, out, default_runtime().spmm(a, b, out=out, c=c, alpha=alpha, beta=beta, epilogue=epilogue,
                                                      plan=plan, threads=threads, **named_tensors))


def sddmm(pattern, a, b, *, out=None, alpha=1.0, epilogue=None, plan=None, threads=0, **named_tensors):
    """out[p] = epilogue(A[i,:]·B[j,:]) for each stored entry p = (i, j) of the pattern, in its order: A is M×K, B is
    N×K; the epilogue sees acc, alpha, s (the pattern's value) and tensors [m], [n] ("acc / 8 + s")."""
    return _as_kind_of(a, out, default_runtime().sddmm(pattern, a, b, out=out, alpha=alpha, epilogue=epilogue,
                                                       plan=plan, threads=threads, **named_tensors))


def plan(matrix, threads=0):
    """The inspector's plan of a sparse matrix's pattern: its structure checked, its rows split into balanced tasks."""
    return default_runtime().plan(matrix, threads)


def emit_gemm(m, n, k, *, epilogue="alpha*acc + beta*c", layout_a="row", layout_b="row", asm=False):
    """The LLVM IR (or with asm=True the host assembly) of the kernel the runtime would use for this GEMM."""
    return default_runtime().emit_gemm(m, n, k, epilogue=epilogue, layout_a=layout_a, layout_b=layout_b, asm=asm)


__all__ = ["Error", "Runtime", "SparsePlan", "CsrMatrix", "gemm", "attention", "spmm", "sddmm", "plan", "emit_gemm",
           "default_runtime", "__version__"]

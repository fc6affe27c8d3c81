"""tessera's Python module on PyTorch tensors (Debian's python3-torch): results against torch's own arithmetic, tensors
read and written in place through DLPack, torch in and torch out, bad tensors refused with tessera's message."""
import math

import numpy as np
import pytest
import torch

import tessera


def rand(*shape, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randint(-3, 4, shape, generator=g).to(dtype)  # small integers: products are exact


def test_gemm_matches_torch_matmul_and_returns_torch():
    a, b = rand(37, 29), rand(29, 41, seed=1)
    d = tessera.gemm(a, b)
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32 and d.shape == (37, 41)
    assert torch.equal(d, a @ b)
    bias = rand(41, seed=2)
    d = tessera.gemm(a, b, epilogue="relu(0.5*acc + bias[n])", bias=bias)
    torch.testing.assert_close(d, torch.relu(0.5 * (a @ b) + bias), rtol=1e-6, atol=0)


def test_strided_torch_views_are_read_in_place():
    big = rand(80, 70)
    a = big[1:60:2, 3:50]  # rows 2 apart, not contiguous
    b = rand(41, 47, seed=3).t()  # column-major view
    assert not a.is_contiguous() and not b.is_contiguous()
    assert torch.equal(tessera.gemm(a, b), a @ b)
    for x in (a, b, rand(4, 5, 6)[:, ::2, :]):
        pointer, dtype, shape, strides = tessera._view(x)
        assert pointer == x.data_ptr()  # the tensor's own memory, no copy
        assert dtype == "f32" and tuple(shape) == tuple(x.shape) and tuple(strides) == x.stride()


def test_out_torch_tensor_is_written_in_place_and_nothing_else():
    a, b = rand(33, 20), rand(20, 25, seed=1)
    canvas = torch.full((40, 60), float("nan"))
    out = canvas[2:35, 10:35]
    pointer = out.data_ptr()
    tessera.gemm(a, b, out=out)
    assert out.data_ptr() == pointer
    assert torch.equal(canvas[2:35, 10:35], a @ b)
    mask = torch.ones_like(canvas, dtype=torch.bool)
    mask[2:35, 10:35] = False
    assert torch.isnan(canvas[mask]).all()


def test_bfloat16_tensors_match_torch_in_float():
    a, b = rand(48, 64, dtype=torch.bfloat16), rand(64, 40, seed=1, dtype=torch.bfloat16)
    assert tessera._view(a)[1] == "bf16"
    if "avx512_bf16" not in open("/proc/cpuinfo").read():
        # A host without vdpbf16ps refuses bf16 GEMM, saying why.
        with pytest.raises(tessera.Error, match="needs avx512_bf16"):
            tessera.gemm(a, b)
        return
    d = tessera.gemm(a, b)  # f32 accumulation and output: integers in bf16 are exact
    assert isinstance(d, torch.Tensor) and d.dtype == torch.float32
    assert torch.equal(d, a.float() @ b.float())


def test_dlpack_round_trip():
    a, b = rand(16, 24), rand(24, 8, seed=1)
    d = tessera.gemm(a, b)
    assert isinstance(d, torch.Tensor) and torch.equal(d, a @ b)
    # torch -> tessera -> torch: the returned tensor goes back in by DLPack as its own memory, and numpy sees the same.
    assert tessera._view(d)[0] == d.data_ptr() == np.from_dlpack(d).__array_interface__["data"][0]
    assert torch.equal(tessera.gemm(d, rand(8, 5, seed=2)), (a @ b) @ rand(8, 5, seed=2))


def attention_reference(q, k, v, causal, slope=None):
    """Softmax attention in float64 with torch's own operators; K and V heads shared by groups of Q heads."""
    q, k, v = q.double(), k.double(), v.double()
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    sq, sk = q.shape[2], k.shape[2]
    i = torch.arange(sq).view(sq, 1) + (sk - sq)  # bottom-right aligned, as tessera and FlashAttention
    j = torch.arange(sk).view(1, sk)
    if slope is not None:
        s = s - slope.double().view(1, -1, 1, 1) * (i - j)
    if causal:
        s = s.masked_fill(j > i, float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def test_attention_on_torch_tensors_matches_torch_softmax():
    g = torch.Generator().manual_seed(5)
    q = torch.randn(2, 4, 33, 32, generator=g)
    k, v = torch.randn(2, 2, 47, 32, generator=g), torch.randn(2, 2, 47, 32, generator=g)
    o = tessera.attention(q, k, v, causal=True)
    assert isinstance(o, torch.Tensor) and o.shape == (2, 4, 33, 32)
    torch.testing.assert_close(o.double(), attention_reference(q, k, v, True), rtol=1e-4, atol=1e-5)
    slope = torch.linspace(0.1, 0.4, 4)
    o = tessera.attention(q, k, v, score_mod="s - slope[h]*(i - j)", slope=slope)
    torch.testing.assert_close(o.double(), attention_reference(q, k, v, False, slope), rtol=1e-4, atol=1e-5)
    # BSHD memory (as most torch models hold it), read in place through a transposed view.
    qb = torch.randn(2, 33, 4, 32, generator=g)
    out = torch.empty(2, 33, 4, 32)
    tessera.attention(qb.transpose(1, 2), k, v, out=out.transpose(1, 2))
    torch.testing.assert_close(out.transpose(1, 2).double(), attention_reference(qb.transpose(1, 2), k, v, False),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")
def test_spmm_and_sddmm_with_torch_dense_operands():
    dense = rand(30, 20) * (rand(30, 20, seed=7) > 1)  # about 30% stored
    csr = dense.to_sparse_csr()
    a = tessera.CsrMatrix(csr.crow_indices().numpy(), csr.col_indices().numpy(), csr.values().numpy(), dense.shape)
    b = rand(20, 12, seed=1)
    out = torch.empty(30, 12)
    tessera.spmm(a, b, out=out)
    assert torch.equal(out, dense @ b)
    d = tessera.spmm(a, b)
    assert isinstance(d, torch.Tensor) and torch.equal(d, dense @ b)
    x, y = rand(30, 16, seed=2), rand(20, 16, seed=3)
    sampled = tessera.sddmm(a, x, y, epilogue="acc * s")  # (X·Yᵀ) at the stored entries, in CSR order, times them
    assert isinstance(sampled, torch.Tensor)
    assert torch.equal(sampled, (x @ y.t())[dense != 0] * dense[dense != 0])


def test_bad_torch_tensors_raise_tessera_error():
    a = rand(5, 4)
    with pytest.raises(tessera.Error, match="b: has 5 rows, but a has K = 4 columns"):
        tessera.gemm(a, a)
    with pytest.raises(tessera.Error, match="must hold float32, bfloat16, uint8 or int8"):
        tessera.gemm(a.double(), rand(4, 3))
    with pytest.raises(tessera.Error, match="must hold float32, bfloat16, uint8 or int8"):
        tessera.gemm(a, rand(4, 3).to(torch.int32))
    with pytest.raises(tessera.Error, match="bias"):
        tessera.gemm(a, rand(4, 3), epilogue="acc + bias[n]", bias=rand(2))  # 2 values for N = 3

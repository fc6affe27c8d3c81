"""tessera's Python module against numpy: results, zero-copy views, DLPack, bad input."""
import numpy as np
import pytest

import tessera


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).integers(-3, 4, size=shape).astype(np.float32)


def test_plain_and_epilogues_match_numpy():
    a, b = rand(37, 29), rand(29, 41)
    np.testing.assert_array_equal(tessera.gemm(a, b), a @ b)  # small integers: exact
    bias, scale, residual = rand(41, seed=1), rand(37, seed=2), rand(37, 41, seed=3)
    d = tessera.gemm(a, b, epilogue="relu(alpha*acc + bias[n])", alpha=0.5, bias=bias)
    np.testing.assert_allclose(d, np.maximum(0.5 * (a @ b) + bias, 0), rtol=1e-6)
    d = tessera.gemm(a, b, epilogue="scale[m]*acc + residual[m,n]", scale=scale, residual=residual)
    np.testing.assert_allclose(d, scale[:, None] * (a @ b) + residual, rtol=1e-6)
    c = rand(37, 41, seed=4)
    np.testing.assert_allclose(tessera.gemm(a, b, c=c, beta=2.0), a @ b + 2 * c, rtol=1e-6)


def test_any_strides_and_batches():
    big_a, big_b = rand(80, 70), rand(90, 60)
    a, b = big_a[1:60:2, 3:50], big_b[5:52, ::2]  # strided views, not contiguous
    np.testing.assert_array_equal(tessera.gemm(a, b), a @ b)
    at, bt = rand(29, 37).T, rand(41, 29).T  # column-major (Fortran-ordered) views
    np.testing.assert_array_equal(tessera.gemm(at, bt), at @ bt)
    a3, b3 = rand(3, 17, 19), rand(3, 19, 23)
    np.testing.assert_array_equal(tessera.gemm(a3, b3), a3 @ b3)
    np.testing.assert_array_equal(tessera.gemm(a3, rand(19, 23)), a3 @ rand(19, 23))  # B shared by the batch


def test_out_is_written_in_place_and_nothing_else():
    a, b = rand(33, 20), rand(20, 25)
    canvas = np.full((40, 60), np.nan, dtype=np.float32)
    out = canvas[2:35, 10:35]  # a view with leading dimension 60 (D needs one unit stride)
    returned = tessera.gemm(a, b, out=out)
    assert returned is out
    np.testing.assert_array_equal(canvas[2:35, 10:35], a @ b)
    mask = np.ones_like(canvas, dtype=bool)
    mask[2:35, 10:35] = False
    assert np.isnan(canvas[mask]).all()  # every other element untouched


def test_views_are_zero_copy():
    for x in (rand(16, 16), rand(40, 30)[::3, 1::2], rand(12, 9).T, rand(4, 5, 6)[:, ::2, :]):
        pointer, dtype, shape, strides = tessera._view(x)
        assert pointer == x.__array_interface__["data"][0]
        assert dtype == "f32" and tuple(shape) == x.shape
        assert tuple(strides) == tuple(s // 4 for s in x.strides)


class DLPackOnly:
    """An object that offers only the DLPack protocol (as a framework tensor does)."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_inputs_are_used_in_place():
    a, b = rand(21, 13), rand(13, 17)[:, ::2]
    np.testing.assert_array_equal(tessera.gemm(DLPackOnly(a), DLPackOnly(b)), a @ b)
    assert tessera._view(DLPackOnly(b))[0] == b.__array_interface__["data"][0]
    assert tuple(tessera._view(DLPackOnly(b))[3]) == (b.strides[0] // 4, b.strides[1] // 4)


def test_bad_input_raises_tessera_error_with_the_cpp_message():
    a = rand(5, 4)
    with pytest.raises(tessera.Error, match="b: has 5 rows, but a has K = 4 columns"):
        tessera.gemm(a, a)
    with pytest.raises(ValueError, match="must hold float32"):
        tessera.gemm(a.astype(np.float64), rand(4, 3))
    with pytest.raises(tessera.Error, match="expected a numpy array or an object with __dlpack__, got list"):
        tessera.gemm([[1.0]], a)
    with pytest.raises(tessera.Error, match="column"):
        tessera.gemm(a, rand(4, 3), epilogue="gelu(acc")
    with pytest.raises(tessera.Error, match="bias"):
        tessera.gemm(a, rand(4, 3), epilogue="acc + bias[n]")  # the named tensor is missing
    with pytest.raises(tessera.Error, match="read-only"):
        out = np.zeros((5, 3), dtype=np.float32)
        out.setflags(write=False)
        tessera.gemm(a, rand(4, 3), out=out)


def test_runtime_options_and_emit():
    rt = tessera.Runtime(threads=1, target="cpu:avx2")
    assert rt.threads == 1 and rt.target == "cpu:avx2"
    a, b = rand(30, 20), rand(20, 10)
    np.testing.assert_array_equal(rt.gemm(a, b), a @ b)
    ir = tessera.emit_gemm(64, 64, 64, epilogue="gelu(acc)")
    assert "define" in ir and "gemm_f32" in ir
    assert "vfmadd" in tessera.emit_gemm(64, 64, 64, asm=True)
    with pytest.raises(tessera.Error, match="layout_a"):
        tessera.emit_gemm(8, 8, 8, layout_a="diagonal")


def test_python_call_overhead_is_small():
    """Python's call over the C++ call for a 64^3 GEMM: reported, and bounded loosely (the README's figure comes from
    python/bench_overhead.py, medians of repeats on an idle machine)."""
    import time
    rt = tessera.Runtime(threads=1)
    a, b, out = rand(64, 64), rand(64, 64), np.empty((64, 64), dtype=np.float32)
    cpp = min(rt._time_gemm(a, b, out, 2000) for _ in range(3))
    calls = 2000
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            rt.gemm(a, b, out=out, threads=1)
        best = min(best, (time.perf_counter() - start) / calls)
    assert best - cpp < 50e-6, f"python {best * 1e6:.1f} us, C++ {cpp * 1e6:.1f} us"


def reference_attention(q, k, v, causal=False, bias=None):
    b, h, sq, d = q.shape
    group = h // k.shape[1]
    out = np.zeros((b, h, sq, v.shape[3]), dtype=np.float64)
    for bi in range(b):
        for hi in range(h):
            s = q[bi, hi].astype(np.float64) @ k[bi, hi // group].astype(np.float64).T / np.sqrt(d)
            if bias is not None:
                s = s + bias[hi]
            if causal:
                skv = k.shape[2]
                i, j = np.meshgrid(np.arange(sq), np.arange(skv), indexing="ij")
                s = np.where(j > i + (skv - sq), -np.inf, s)
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[bi, hi] = (p / p.sum(axis=1, keepdims=True)) @ v[bi, hi // group]
    return out


def test_attention_matches_numpy():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((2, 4, 33, 16)).astype(np.float32)
    k = rng.standard_normal((2, 2, 47, 16)).astype(np.float32)  # grouped-query: 4 heads on 2 kv heads
    v = rng.standard_normal((2, 2, 47, 16)).astype(np.float32)
    np.testing.assert_allclose(tessera.attention(q, k, v), reference_attention(q, k, v), atol=2e-5)
    np.testing.assert_allclose(tessera.attention(q, k, v, causal=True), reference_attention(q, k, v, causal=True),
                               atol=2e-5)
    slope = np.array([0.5, 0.25, 0.125, 0.0625], dtype=np.float32)  # ALiBi as text, a tensor and a scalar
    got = tessera.attention(q, k, v, score_mod="s - c * slope[h] * (i - j)", slope=slope, c=2.0)
    i, j = np.meshgrid(np.arange(33), np.arange(47), indexing="ij")
    bias = np.stack([-2.0 * slope[h] * (i - j) for h in range(4)])
    np.testing.assert_allclose(got, reference_attention(q, k, v, bias=bias), atol=2e-5)


def test_attention_reads_bshd_views_in_place():
    rng = np.random.default_rng(6)
    qkv = rng.standard_normal((1, 40, 3, 2, 8)).astype(np.float32)  # [batch, seq, (q, k, v), heads, d]
    q, k, v = (qkv[:, :, t].transpose(0, 2, 1, 3) for t in range(3))  # BHSD views of BSHD memory
    assert tessera._view(q)[0] == q.__array_interface__["data"][0]
    np.testing.assert_allclose(tessera.attention(q, k, v), reference_attention(q, k, v), atol=2e-5)
    with pytest.raises(tessera.Error, match="score"):
        tessera.attention(q, k, v, score_mod="s +")
    with pytest.raises(tessera.Error, match="must hold float32"):
        tessera.attention(q.astype(np.float64), k, v)


def test_varlen_attention_matches_each_sequence_alone():
    # Three sequences of different lengths (one empty) packed as FlashAttention's varlen call takes them, GQA 4:2,
    # causal (bottom-right per sequence), each checked against numpy on that sequence alone.
    rng = np.random.default_rng(9)
    lens_q, lens_k = [5, 0, 17], [9, 3, 17]
    cu_q, cu_k = np.cumsum([0] + lens_q).astype(np.int32), np.cumsum([0] + lens_k)  # int32 and int64 both taken
    q = rng.standard_normal((cu_q[-1], 4, 16)).astype(np.float32)
    k = rng.standard_normal((cu_k[-1], 2, 16)).astype(np.float32)
    v = rng.standard_normal((cu_k[-1], 2, 8)).astype(np.float32)
    got = tessera.attention(q, k, v, cu_seqlens_q=cu_q, cu_seqlens_k=cu_k, causal=True)
    assert got.shape == (cu_q[-1], 4, 8)
    for b in range(3):
        if lens_q[b] == 0:
            continue
        qs = q[cu_q[b]:cu_q[b + 1]].transpose(1, 0, 2)[None]
        ks = k[cu_k[b]:cu_k[b + 1]].transpose(1, 0, 2)[None]
        vs = v[cu_k[b]:cu_k[b + 1]].transpose(1, 0, 2)[None]
        want = reference_attention(qs, ks, vs, causal=True)[0].transpose(1, 0, 2)
        np.testing.assert_allclose(got[cu_q[b]:cu_q[b + 1]], want, atol=2e-5)
    with pytest.raises(tessera.Error, match="cu_seqlens_k"):
        tessera.attention(q, k, v, cu_seqlens_q=cu_q)
    with pytest.raises(tessera.Error, match="1-D array of integers"):
        tessera.attention(q, k, v, cu_seqlens_q=cu_q.astype(np.float32), cu_seqlens_k=cu_k)
    with pytest.raises(tessera.Error, match="seq_offsets"):
        tessera.attention(q, k, v, cu_seqlens_q=cu_q[::-1].copy(), cu_seqlens_k=cu_k)


def test_int8_gemm_sums_exactly():
    # uint8 activations times int8 weights, summed in i32: the f32 result is the exact integer sum rounded once.
    rng = np.random.default_rng(5)
    a = rng.integers(0, 256, size=(37, 131), dtype=np.uint8)
    b = rng.integers(-128, 128, size=(131, 70), dtype=np.int8)
    try:
        d = tessera.gemm(a, b)
    except tessera.Error as e:
        if "int8 GEMM needs" in str(e):
            pytest.skip(str(e))
        raise
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.float32))
    scale = rng.uniform(0.01, 0.1, size=70).astype(np.float32)
    q = tessera.gemm(a, b, epilogue="scale[n] * acc", scale=scale)
    np.testing.assert_allclose(q, (a.astype(np.float64) @ b.astype(np.float64)) * scale, rtol=1e-6)
    # Requantised: rounded to nearest (ties to even) and saturated into a uint8 out.
    out = np.empty((37, 70), dtype=np.uint8)
    tessera.gemm(a, b, out=out, epilogue="scale[n] * acc + 128", scale=scale)
    want = np.clip(np.rint(q.astype(np.float64) + 128), 0, 255)
    assert np.abs(out.astype(np.float64) - want).max() <= 1  # f32 vs float64 near a .5 boundary
    assert (out == 0).any() and (out == 255).any()
    # int8 A times uint8 B: AMX tiles only (tdpbsud), exact where the host has them, refused by the vector kernels.
    try:
        swapped = tessera.gemm(b.T.copy(), a.T.copy())
    except tessera.Error as e:
        assert "needs AMX tiles" in str(e)
    else:
        np.testing.assert_array_equal(swapped, (b.T.astype(np.int64) @ a.T.astype(np.int64)).astype(np.float32))

"""tessera.spmm and tessera.sddmm from Python: CSR and BSR against dense numpy references, plans, bad input."""
import numpy as np
import pytest

import tessera


def random_csr(rows, cols, density, seed, index=np.int32):
    """A CSR matrix with small-integer values (exact sums) and some empty rows."""
    rng = np.random.default_rng(seed)
    mask = rng.random((rows, cols)) < density
    mask[::7] = False
    indptr = np.concatenate([[0], np.cumsum(mask.sum(axis=1))]).astype(index)
    indices = np.nonzero(mask)[1].astype(index)
    data = rng.integers(-3, 4, size=len(indices)).astype(np.float32)
    return tessera.CsrMatrix(indptr, indices, data, (rows, cols))


def ints(*shape, seed=0):
    return np.random.default_rng(seed).integers(-3, 4, size=shape).astype(np.float32)


@pytest.mark.parametrize("index", [np.int32, np.int64])
def test_spmm_matches_dense_with_an_epilogue(index):
    a = random_csr(53, 41, 0.2, 1, index)
    b, bias = ints(41, 19, seed=2), ints(19, seed=3)
    np.testing.assert_array_equal(tessera.spmm(a, b), a.toarray() @ b)
    d = tessera.spmm(a, b, epilogue="relu(acc + bias[n])", bias=bias)
    np.testing.assert_array_equal(d, np.maximum(a.toarray() @ b + bias, 0))
    c = ints(53, 19, seed=4)
    np.testing.assert_array_equal(tessera.spmm(a, b, c=c, beta=2.0), a.toarray() @ b + 2 * c)


def test_spmm_bsr_and_out_in_place():
    rng = np.random.default_rng(5)
    # 6x10 in 2x5 blocks (3 block rows, 2 block columns).
    indptr = np.array([0, 2, 2, 3], np.int32)
    indices = np.array([0, 1, 1], np.int32)
    data = rng.integers(-3, 4, size=(3, 2, 5)).astype(np.float32)
    a = tessera.CsrMatrix(indptr, indices, data, (6, 10), blocksize=(2, 5))
    b = ints(10, 7, seed=6)
    out = np.full((6, 7), np.nan, np.float32)
    assert tessera.spmm(a, b, out=out) is out
    np.testing.assert_array_equal(out, a.toarray() @ b)


def test_sddmm_samples_the_product_at_the_pattern():
    pattern = random_csr(31, 23, 0.3, 7)
    a, b = ints(31, 16, seed=8), ints(23, 16, seed=9)
    rows = np.repeat(np.arange(31), np.diff(pattern.indptr))
    full = a @ b.T
    out = tessera.sddmm(pattern, a, b, epilogue="acc * s")
    np.testing.assert_array_equal(out, full[rows, pattern.indices] * pattern.data)
    no_values = tessera.CsrMatrix(pattern.indptr, pattern.indices, None, pattern.shape)
    np.testing.assert_array_equal(tessera.sddmm(no_values, a, b, alpha=0.5, epilogue="alpha * acc"),
                                  0.5 * full[rows, pattern.indices])


def test_a_plan_is_reused_and_a_changed_pattern_refused():
    a = random_csr(40, 30, 0.25, 10)
    b = ints(30, 8, seed=11)
    plan = tessera.plan(a)
    assert plan.nnz == len(a.indices) and plan.tasks >= 1
    for _ in range(2):
        np.testing.assert_array_equal(tessera.spmm(a, b, plan=plan), a.toarray() @ b)
    row = int(np.argmax(np.diff(a.indptr) >= 1))
    p = a.indptr[row]
    original = a.indices[p]
    a.indices[p] = (original + 1) % 30 if a.indptr[row + 1] - p == 1 else original
    if a.indices[p] != original:
        out = np.full((40, 8), -5.0, np.float32)
        with pytest.raises(tessera.Error, match="plan"):
            tessera.spmm(a, b, plan=plan, out=out)
        assert (out == -5).all()


def test_bad_input_is_named():
    a = random_csr(20, 20, 0.3, 12)
    b = ints(20, 4, seed=13)
    with pytest.raises(tessera.Error, match="indptr"):
        tessera.spmm(tessera.CsrMatrix(a.indptr.astype(np.float64), a.indices, a.data, a.shape), b)
    with pytest.raises(tessera.Error, match="dtype of indptr"):
        tessera.spmm(tessera.CsrMatrix(a.indptr, a.indices.astype(np.int64), a.data, a.shape), b)
    with pytest.raises(tessera.Error, match="data"):
        tessera.spmm(tessera.CsrMatrix(a.indptr, a.indices, a.data.astype(np.float64), a.shape), b)
    with pytest.raises(tessera.Error, match="values"):
        tessera.spmm(tessera.CsrMatrix(a.indptr, a.indices, a.data[:-1], a.shape), b)
    with pytest.raises(tessera.Error, match="indptr: holds 20 offsets"):
        tessera.spmm(tessera.CsrMatrix(a.indptr[:-1], a.indices, a.data, a.shape), b)
    with pytest.raises(tessera.Error, match="block"):
        tessera.spmm(tessera.CsrMatrix(a.indptr, a.indices, a.data, a.shape, blocksize=(0, 2)), b)
    with pytest.raises(tessera.Error, match="b"):
        tessera.spmm(a, ints(19, 4))
    with pytest.raises(tessera.Error, match="sparse matrix"):
        tessera.spmm(np.zeros((3, 3), np.float32), b)
    row = int(np.argmax(np.diff(a.indptr) >= 2))
    p = a.indptr[row]
    unsorted = a.indices.copy()
    unsorted[p], unsorted[p + 1] = unsorted[p + 1], unsorted[p]
    with pytest.raises(tessera.Error, match="col_indices"):
        tessera.spmm(tessera.CsrMatrix(a.indptr, unsorted, a.data, a.shape), b)
    with pytest.raises(tessera.Error, match="bias"):
        tessera.sddmm(a, ints(20, 8), ints(20, 8), epilogue="acc + bias[m]")

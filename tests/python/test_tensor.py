"""kiln.Tensor and numpy: round trips of every dtype, zero-sized and non-contiguous arrays,
zero-copy conversion where promised, read-only views back, operators and slicing against numpy."""
import numpy as np
import pytest

import kiln

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_, np.uint8]


def aligned(shape, dtype):
    """A C-contiguous array whose data starts on a 64-byte boundary."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.zeros(n + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    return raw[off:off + n].view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_every_dtype(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((3, 4)) * 10).astype(dtype)
    t = kiln.tensor(a)
    assert t.dtype == np.dtype(dtype).name
    assert t.shape == (3, 4) and t.ndim == 2 and t.size == 12
    back = t.numpy()
    assert back.dtype == a.dtype and np.array_equal(back, a)
    assert np.array_equal(np.asarray(t), a)


def test_zero_sized_and_scalar():
    z = kiln.tensor(np.zeros((0, 3), np.float32))
    assert z.shape == (0, 3) and z.numpy().shape == (0, 3)
    s = kiln.tensor(np.float64(2.5))
    assert s.shape == () and float(s) == 2.5


def test_non_contiguous_is_copied_correctly():
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    view = a[:, ::2]  # strided
    t = kiln.tensor(view)
    assert np.array_equal(t.numpy(), view)
    assert not kiln.tensor_shares_memory(t, view)
    a_t = a.T  # Fortran order
    assert np.array_equal(kiln.tensor(a_t).numpy(), a_t)


def test_aligned_contiguous_is_zero_copy_and_results_are_read_only():
    a = aligned((8, 8), np.float32)
    a[...] = np.arange(64).reshape(8, 8)
    t = kiln.tensor(a)
    assert kiln.tensor_shares_memory(t, a)
    out = t.numpy()
    assert not out.flags.writeable
    with pytest.raises(ValueError):
        out[0, 0] = 1
    # kiln keeps the borrowed buffer alive after numpy's name is gone.
    del a
    assert t.numpy()[7, 7] == 63
    # Misaligned data is copied.
    b = aligned((65,), np.float32)[1:]
    assert not kiln.tensor_shares_memory(kiln.tensor(b), b)


def test_lists_and_python_floats_become_float32():
    assert kiln.tensor([1.0, 2.0]).dtype == "float32"
    assert kiln.tensor([1, 2]).dtype == "int64"
    assert kiln.tensor([1.0, 2.0], dtype="float64").dtype == "float64"
    assert kiln.tensor(np.array([1, 2]), dtype=np.float32).dtype == "float32"


def test_operators_against_numpy():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 4)).astype(np.float64)
    b = rng.standard_normal((3, 4)).astype(np.float64)
    w = rng.standard_normal((4, 2)).astype(np.float64)
    ta, tb, tw = kiln.tensor(a), kiln.tensor(b), kiln.tensor(w)
    # float64 elementwise results are exact to rounding of one operation.
    assert np.allclose((ta + tb).numpy(), a + b, rtol=1e-15, atol=0)
    assert np.allclose((ta - 2).numpy(), a - 2, rtol=1e-15, atol=1e-15)
    assert np.allclose((3 * ta).numpy(), 3 * a, rtol=1e-15, atol=0)
    assert np.allclose((ta / tb).numpy(), a / b, rtol=1e-15, atol=0)
    assert np.allclose((-ta).numpy(), -a, rtol=0, atol=0)
    # matmul: the error bound of a k-term dot product, 4 * k * eps * sum |a||w|.
    bound = 4 * 4 * np.finfo(np.float64).eps * (np.abs(a) @ np.abs(w))
    assert np.all(np.abs((ta @ tw).numpy() - a @ w) <= bound)
    assert np.array_equal((ta > tb).numpy(), a > b)


def test_slicing_like_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    t = kiln.tensor(a)
    for key in [1, -1, (0, 2), (slice(None), 1), (slice(1, None), slice(0, 4, 2)),
                (Ellipsis, 3), (1, Ellipsis), (slice(None), slice(None), slice(1, 5, 3))]:
        assert np.array_equal(t[key].numpy(), a[key]), key
    with pytest.raises(IndexError):
        t[3]
    with pytest.raises(IndexError):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError):
        t[::-1]


def test_printing():
    t = kiln.tensor(np.array([1.5, 2.0], np.float32))
    assert "float32" in repr(t) and "1.5" in str(t)


def test_unsupported_numpy_dtype_is_a_type_error():
    with pytest.raises(TypeError, match="int8"):
        kiln.tensor(np.zeros(3, np.int8))

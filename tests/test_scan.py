"""``pyreduce.scan`` and the cumulative sums and products on it, against
``itertools.accumulate`` and ``np.cumsum``/``np.cumprod``.

Sizes sit around the warp (32), the simulator's tile (64 threads x 2 items =
128 elements) and a second level of tiles (over 128 tiles: 16384 elements at
most here, so three levels are reached with ``SMALL``'s 32 x 1 = 32-element
tiles). ``affine`` (``tests/oracles.py``) is associative and not commutative:
any reordered or dropped operand shows.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pyreduce
from conftest import examples
from oracles import P, affine, affine_data

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SIZES = [0, 1, 31, 32, 33, 127, 128, 129, 1000, 5000]
#: a tile of 128 elements in the simulator; ``SMALL``'s is 32
SIM = dict(tuning=pyreduce.Tuning(block_size=64, items_per_thread=2))
SMALL = dict(tuning=pyreduce.Tuning(block_size=32, items_per_thread=1))
IDENTITY = 1 * P  # x -> 1*x + 0


def on(backend, **extra):
    return {"backend": backend, **(SIM if backend == "sim" else {}), **extra}


def accumulate(values, op, initial=None):
    out = list(itertools.accumulate(values, op, initial=initial))
    return out[1:] if initial is not None else out


def host(result):
    return result.copy_to_host() if hasattr(result, "copy_to_host") else result


@pytest.mark.parametrize("n", SIZES)
def test_affine_in_order(backend, n):
    x = affine_data(n, seed=n)
    got = pyreduce.scan(x, affine, **on(backend))
    assert got.dtype == np.int64 and got.shape == (n,)
    assert got.tolist() == accumulate(x.tolist(), affine)


@pytest.mark.parametrize("n", [0, 1, 33, 129, 1000])
def test_affine_exclusive_and_initial(backend, n):
    x = affine_data(n, seed=n + 1)
    init = int(affine_data(1, seed=7)[0])
    ex = pyreduce.scan(x, affine, IDENTITY, inclusive=False, **on(backend))
    assert ex.tolist() == accumulate([IDENTITY] + x.tolist()[:-1], affine)[:n]
    ex = pyreduce.scan(x, affine, inclusive=False, initial=init, **on(backend))
    assert ex.tolist() == ([init] + accumulate(x.tolist(), affine, init))[:n]
    inc = pyreduce.scan(x, affine, initial=init, **on(backend))
    assert inc.tolist() == accumulate(x.tolist(), affine, init)


@pytest.mark.sim
def test_three_levels_of_tiles():
    """32-element tiles: 5000 elements give 157 tiles, whose totals take a
    second scan of 5 tiles, whose totals a third."""
    x = affine_data(5000, seed=2)
    got = pyreduce.scan(x, affine, backend="sim", **SMALL)
    assert got.tolist() == accumulate(x.tolist(), affine)


INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bool"]
FLOATS = ["float16", "float32", "float64", "complex64", "complex128"]


def data(n, dtype, seed):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 100), n, endpoint=True).astype(dt)
    values = rng.standard_normal(n) + (1j * rng.standard_normal(n) if dt.kind == "c" else 0)
    return values.astype(dt)


def expected_sum(x, axis=None):
    """np.cumsum, with pyreduce's float16 rule: accumulated in float32."""
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    return np.cumsum(x, axis=axis)


@settings(max_examples=examples(30))
@given(n=st.sampled_from(SIZES), dtype=st.sampled_from(INTS + FLOATS), seed=st.integers(0, 9))
def test_cumsum_cpu(n, dtype, seed):
    x = data(n, dtype, seed)
    got, want = pyreduce.cumsum(x, backend="cpu"), expected_sum(x)
    assert got.dtype == want.dtype
    # the cpu backend is sequential, as NumPy is: the same roundings
    assert np.array_equal(got, want)


@pytest.mark.sim
@settings(max_examples=examples(12))
@given(n=st.sampled_from(SIZES), dtype=st.sampled_from(INTS + FLOATS), seed=st.integers(0, 9),
       on_device=st.booleans())
def test_cumsum_sim(n, dtype, seed, on_device):
    from numba import cuda

    x = data(n, dtype, seed)
    got = pyreduce.cumsum(cuda.to_device(x) if on_device else x, backend="sim", **SIM)
    assert isinstance(got, np.ndarray) != on_device  # device in, device out
    got, want = host(got), expected_sum(x)
    assert got.dtype == want.dtype
    if want.dtype.kind in "fc":  # tiles are summed before their prefix is added
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4 * max(1, n))
    else:
        assert np.array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int32", "float64"])
def test_cumprod(backend, dtype):
    x = data(129, dtype, 3)
    x[x == 0] = 1
    x = x[:40] if dtype != "float64" else x  # ints: stay short of where products wrap
    got = host(pyreduce.cumprod(x, **on(backend)))
    want = np.cumprod(x)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("op,ufunc", [(max, np.maximum), ("min", np.minimum),
                                      (np.bitwise_xor, np.bitwise_xor)])
def test_builtin_ops(backend, op, ufunc):
    x = data(1000, "int32", 4)
    got = host(pyreduce.scan(x, op, **on(backend)))
    assert got.dtype == np.int32
    assert np.array_equal(got, ufunc.accumulate(x))


@pytest.mark.parametrize("shape", [(3, 129), (129, 3), (2, 33, 5), (4, 0, 3), (1,)])
def test_axes(backend, shape):
    x = affine_data(int(np.prod(shape)), seed=5).reshape(shape)
    for axis in range(len(shape)) if len(shape) > 1 else (-1,):  # -1 is the last
        got = host(pyreduce.scan(x, affine, axis=axis, **on(backend)))
        want = np.apply_along_axis(lambda v: np.array(accumulate(v.tolist(), affine),
                                                      dtype=np.int64), axis, x) \
            if x.size else np.zeros(shape, np.int64)
        assert got.shape == shape and np.array_equal(got, want)
    small = (x % 100).astype(np.int16)
    for axis in (None, 0, -1):
        assert np.array_equal(host(pyreduce.cumsum(small, axis=axis, **on(backend))),
                              np.cumsum(small, axis=axis))


@pytest.mark.sim
def test_axes_on_device():
    from numba import cuda

    x = affine_data(3 * 40, seed=6).reshape(3, 40)
    for axis in (0, 1):
        got = pyreduce.scan(cuda.to_device(x), affine, axis=axis, backend="sim", **SIM)
        want = np.apply_along_axis(lambda v: accumulate(v.tolist(), affine), axis, x)
        assert np.array_equal(got.copy_to_host(), want)
    strided = cuda.to_device(x)[:, ::3]
    got = pyreduce.cumsum(strided, backend="sim", **SIM)
    assert np.array_equal(got.copy_to_host(), np.cumsum(x[:, ::3]))


def test_cumulative_sum(backend):
    x = data(130, "int16", 8)
    got = host(pyreduce.cumulative_sum(x, include_initial=True, **on(backend)))
    assert got.dtype == np.int64 and np.array_equal(got, np.concatenate([[0], np.cumsum(x)]))
    m = x.reshape(10, 13)
    for axis in (0, 1):
        got = host(pyreduce.cumulative_sum(m, axis=axis, include_initial=True, **on(backend)))
        want = np.concatenate([np.zeros_like(np.take(m, [0], axis), dtype=np.int64),
                               np.cumsum(m, axis=axis)], axis=axis)
        assert np.array_equal(got, want)
        assert np.array_equal(host(pyreduce.cumulative_sum(m, axis=axis, **on(backend))),
                              np.cumsum(m, axis=axis))
    empty = host(pyreduce.cumulative_sum(np.zeros(0, np.float32), include_initial=True,
                                         **on(backend)))
    assert empty.tolist() == [0.0] and empty.dtype == np.float32


def test_cumulative_prod(backend):
    """The array API's cumulative_prod, as NumPy's (2.1+): each line starts
    with a one under include_initial, np.prod's accumulator, axis needed above 1-D."""
    x = np.array([1, -2, 3, 1, -1, 2, 1, 1, -3, 2, 1, 2], dtype=np.int8)
    for include_initial in (False, True):
        got = host(pyreduce.cumulative_prod(x, include_initial=include_initial, **on(backend)))
        want = np.cumulative_prod(x, include_initial=include_initial)
        assert got.dtype == want.dtype == np.int64 and np.array_equal(got, want)
        m = x.reshape(3, 4)
        for axis in (0, 1, -1):
            got = host(pyreduce.cumulative_prod(m, axis=axis, include_initial=include_initial,
                                                **on(backend)))
            assert np.array_equal(got, np.cumulative_prod(m, axis=axis,
                                                          include_initial=include_initial))
    f = np.linspace(0.5, 1.5, 7, dtype=np.float32)
    got = host(pyreduce.cumulative_prod(f, dtype=np.float64, **on(backend)))
    want = np.cumulative_prod(f, dtype=np.float64)
    assert got.dtype == np.float64 and np.allclose(got, want, rtol=1e-12)
    empty = host(pyreduce.cumulative_prod(np.zeros((2, 0), np.float32), axis=1,
                                          include_initial=True, **on(backend)))
    assert empty.tolist() == [[1.0], [1.0]] and empty.dtype == np.float32
    with pytest.raises(ValueError, match="cumulative_prod of a 2-D array needs axis="):
        pyreduce.cumulative_prod(m, backend=backend)


def test_dtype_and_scalars(backend):
    x = np.arange(1, 40, dtype=np.int32)
    got = host(pyreduce.cumsum(x, dtype=np.float64, **on(backend)))
    assert got.dtype == np.float64 and np.array_equal(got, np.cumsum(x, dtype=np.float64))
    got = host(pyreduce.cumsum(np.int8(5), **on(backend)))
    assert got.tolist() == [5] and got.dtype == np.int64
    got = host(pyreduce.cumsum([[1, 2], [3, 4]], **on(backend)))
    assert got.tolist() == [1, 3, 6, 10]


@pytest.mark.parametrize("axis", [0, -1, None])
def test_a_0d_array_scans_as_one_element(backend, axis):
    """NumPy scans a 0-d array as an array of one element, along axis 0 or -1
    (any other axis is its AxisError for 1 dimension); the array API's
    cumulative functions too."""
    for got, want in (
            (pyreduce.cumsum(np.array(5), axis=axis, **on(backend)),
             np.cumsum(np.array(5), axis=axis)),
            (pyreduce.cumprod(np.array(2.5, np.float32), axis=axis, **on(backend)),
             np.cumprod(np.array(2.5, np.float32), axis=axis)),
            (pyreduce.cumulative_sum(np.array(7), axis=axis, include_initial=True, **on(backend)),
             np.cumulative_sum(np.array(7), axis=axis, include_initial=True)),
            (pyreduce.scan(np.array(3 * P + 2, np.int64), affine, IDENTITY, axis=axis,
                           inclusive=False, **on(backend)), None)):
        got = host(got)
        if want is not None:
            assert got.shape == want.shape and got.dtype == want.dtype
            assert np.array_equal(got, want)
        else:
            assert got.tolist() == [IDENTITY]
    for bad in (1, -2):
        with pytest.raises(np.exceptions.AxisError, match="dimension 1"):
            pyreduce.cumsum(np.array(5), axis=bad, **on(backend))


@pytest.mark.parametrize("shape, axis", [((0,), None), ((3, 0), 1), ((0, 4), 0), ((0, 4), 1)])
def test_an_exclusive_scan_of_nothing_needs_no_identity(backend, shape, axis):
    """Without elements an exclusive scan has no first output to take from
    initial= or identity=: the empty result, not an error."""
    got = host(pyreduce.scan(np.empty(shape, np.int64), affine, inclusive=False, axis=axis,
                             **on(backend)))
    assert got.shape == (shape if axis is not None else (0,)) and got.dtype == np.int64
    with pytest.raises(ValueError, match="needs initial= or identity="):
        pyreduce.scan(np.ones(shape[:1] + (1,) * (len(shape) - 1) if shape[0] else (2,),
                              np.int64), affine, inclusive=False, **on(backend))


def test_errors(backend):
    x = affine_data(10)
    with pytest.raises(ValueError, match="needs initial= or identity="):
        pyreduce.scan(x, affine, inclusive=False, **on(backend))
    with pytest.raises(ValueError, match="needs axis="):
        pyreduce.cumulative_sum(x.reshape(2, 5), backend=backend)
    with pytest.raises(TypeError, match="cumsum.*'keepdims'"):
        pyreduce.cumsum(x, keepdims=True, backend=backend)
    with pytest.raises(np.exceptions.AxisError):
        pyreduce.scan(x, affine, axis=1, backend=backend)
    with pytest.raises(TypeError, match="initial"):
        pyreduce.scan(x, "add", initial="one", backend=backend)
    # a tuning is checked on every backend (the cpu backend has no kernels to tune)
    with pytest.raises(ValueError, match="scan has one kernel.* sets max_blocks"):
        pyreduce.scan(x, "add", backend=backend, tuning=pyreduce.Tuning(max_blocks=2))
    with pytest.raises(ValueError, match="sets variant"):
        pyreduce.cumsum(x, backend=backend, tuning=pyreduce.Tuning(variant="naive"))
    with pytest.raises(TypeError, match="scan.* unexpected keyword argument 'variant'"):
        pyreduce.scan(x, "add", backend=backend, variant="naive")
    with pytest.raises(TypeError, match="tuning= must be a pyreduce.Tuning"):
        pyreduce.cumprod(x, backend=backend, tuning={"block_size": 64})


def _out_like(want: np.ndarray, on_device: bool):
    """An array to write a result of ``want``'s shape and dtype into, filled with
    a value no result has (so an unwritten element shows)."""
    out = np.full(want.shape, 77, want.dtype)
    if on_device:
        from numba import cuda

        return cuda.to_device(out)
    return out


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("n", [4, 65, 300])
def test_out_may_be_the_input(backend, inclusive, n):
    """``out=`` the input itself (NumPy allows it): the scan of the values the
    input held, inclusive and exclusive, an order-sensitive op, across tiles."""
    x = affine_data(n, seed=n)
    prefixes = list(accumulate(x.tolist(), affine))
    unit = P  # affine's identity, x -> 1 * x + 0, packed as 1 * P + 0
    want = np.array(prefixes if inclusive else [unit] + prefixes[:-1], dtype=x.dtype)
    a = x.copy()
    if backend != "cpu":
        from numba import cuda

        a = cuda.to_device(a)
    got = pyreduce.scan(a, affine, identity=None if inclusive else unit,
                        inclusive=inclusive, out=a, **on(backend))
    assert got is a
    assert np.array_equal(host(a), want), (host(a)[:8], want[:8])


@pytest.mark.parametrize("inclusive", [True, False])
@pytest.mark.parametrize("place", ["ahead", "behind", "strided", "2-D"])
def test_out_overlapping_the_input_elsewhere(backend, inclusive, place):
    """``out=`` sharing memory with the input at other places (NumPy buffers
    such a ufunc call): the scan of the values the input held, an
    order-sensitive op, across tiles. A GPU backend scanned straight into
    ``out=`` and read elements it had already written."""
    n = 700
    x = affine_data(n + 1, seed=5)
    take, put = {"ahead": (slice(1, None), slice(None, -1)),
                 "behind": (slice(None, -1), slice(1, None)),
                 "strided": (slice(None, None, 2), slice(None, (n + 2) // 2)),
                 "2-D": (slice(None, n), slice(1, None))}[place]
    seq = x[take]
    prefixes = list(accumulate(seq.tolist(), affine))
    unit = P
    want = np.array(prefixes if inclusive else [unit] + prefixes[:-1], dtype=x.dtype)
    a = x.copy()
    if backend != "cpu":
        from numba import cuda

        a = cuda.to_device(a)
    src, dst = a[take], a[put]
    if place == "2-D":  # a C-contiguous 2-D input, out= its flat memory shifted by one
        src = src.reshape(35, 20)
    got = pyreduce.scan(src, affine, identity=None if inclusive else unit, axis=None,
                        inclusive=inclusive, out=dst, **on(backend))
    assert got is dst
    assert np.array_equal(host(dst), want), (host(dst)[:8], want[:8])


@pytest.mark.sim
def test_aliasing_is_told_from_the_addresses():
    """What sends a scan through a buffer of its own: the same elements at
    the same addresses (the input itself, or its C-order flat view) may be
    written in place; memory shared at other places may not; disjoint memory
    is not shared."""
    from numba import cuda

    from pyreduce.interop import aliases as _aliases

    a = cuda.to_device(np.arange(200.0))
    m = a.reshape(10, 20)
    assert not _aliases(a, a) and not _aliases(m, a) and not _aliases(m, m.reshape(200))
    assert _aliases(a[1:], a[:-1]) and _aliases(a[::2], a[:100]) and _aliases(a[::-1], a)
    assert not _aliases(a[:100], a[100:]) and not _aliases(a[:0], a)
    assert not _aliases(a, cuda.to_device(np.arange(200.0)))


def test_a_scan_takes_one_axis(backend):
    m = data(60, "int16", 9).reshape(5, 12)
    for axis in ((0, 1), (), (1,)):
        with pytest.raises(TypeError, match="int axis"):
            pyreduce.cumsum(m, axis=axis, **on(backend))


@pytest.mark.parametrize("on_device", [False, True])
def test_out(backend, on_device):
    """``out=`` as NumPy's: the result written into it, and it returned, for the
    flat scan, a scan along each axis, include_initial, an empty input and a
    user operator; a device out only on a GPU backend."""
    if on_device and backend == "cpu":
        pytest.skip("a device out= needs a GPU backend")
    m = data(60, "int16", 9).reshape(5, 12)
    x = affine_data(70, seed=3)
    cases = [
        (lambda o: pyreduce.cumsum(m, out=o, **on(backend)), np.cumsum(m)),
        (lambda o: pyreduce.cumprod(m[:, :4], axis=0, out=o, **on(backend)),
         np.cumprod(m[:, :4], axis=0)),
        (lambda o: pyreduce.cumulative_sum(m, axis=1, include_initial=True, out=o,
                                           **on(backend)),
         np.cumulative_sum(m, axis=1, include_initial=True)),
        (lambda o: pyreduce.cumulative_prod(m[0, :5], out=o, **on(backend)),
         np.cumulative_prod(m[0, :5])),
        (lambda o: pyreduce.cumsum(np.zeros(0, np.float32), out=o, **on(backend)),
         np.zeros(0, np.float32)),
        (lambda o: pyreduce.scan(x, affine, out=o, **on(backend)),
         np.array(accumulate(x.tolist(), affine), dtype=x.dtype)),
    ]
    for call, want in cases:
        out = _out_like(want, on_device)
        assert call(out) is out
        got = host(out)
        assert got.dtype == want.dtype and np.array_equal(got, want), (got, want)
    with pytest.raises(ValueError, match="shape"):
        pyreduce.cumsum(m, out=_out_like(np.zeros(59, np.int64), on_device), **on(backend))
    with pytest.raises(TypeError, match="dtype"):
        pyreduce.cumsum(m, out=_out_like(np.zeros(60, np.float64), on_device), **on(backend))

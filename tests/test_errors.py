"""Errors: every misuse is a TypeError or ValueError (RuntimeError for a backend
this process does not have) whose message names the problem, raised before any
work is done, and the caller's array is never touched."""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pyreduce
from pyreduce import backends

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def backend_names():
    return [b for b in ("cuda", "sim", "cpu") if b in backends.available()]


def raises_untouched(exc, match, x, *args, **kwargs):
    """``pyreduce.reduce(x, *args, **kwargs)`` raises ``exc`` matching ``match``
    and leaves ``x`` as it was."""
    before = np.array(x, copy=True)
    with pytest.raises(exc, match=match):
        pyreduce.reduce(x, *args, **kwargs)
    assert np.array_equal(np.asarray(x), before, equal_nan=before.dtype.kind == "f")


# --------------------------------------------------------------------------
# Operators


@pytest.mark.parametrize("op", [None, 5, 3.5, object(), [1, 2], (max,)],
                         ids=["None", "int", "float", "object", "list", "tuple"])
def test_non_callable_op(backend, op):
    x = np.arange(10.0)
    raises_untouched(TypeError, "callable|op", x, op, backend=backend)


@pytest.mark.parametrize("name", ["sum", "plus", "", "maximum", "ADD"])
def test_unknown_op_name(backend, name):
    raises_untouched(ValueError, f"unknown op name {name!r}", np.arange(10.0), name,
                     backend=backend)


@pytest.mark.parametrize("ufunc", [np.subtract, np.divide, np.power, np.arctan2,
                                   np.remainder, np.true_divide, np.hypot])
def test_ufuncs_that_are_not_reduction_ops(backend, ufunc):
    raises_untouched(TypeError, f"ufunc {ufunc.__name__!r}", np.arange(1.0, 10.0), ufunc,
                     backend=backend)


@pytest.mark.parametrize(
    "op",
    [lambda a: a, lambda a, b, c: a, lambda *a: a[0], lambda a, b, c=1: a + b,
     lambda: 0],
    ids=["one", "three", "varargs", "default", "none"],
)
def test_op_with_wrong_arity(backend, op):
    raises_untouched(TypeError, "two arguments", np.arange(10.0), op, backend=backend)


@pytest.mark.parametrize("op", [operator.sub, pow, abs, (1).__add__, np.add.reduce,
                                type("Callable", (), {"__call__": lambda s, a, b: a})()],
                         ids=["operator.sub", "pow", "abs", "bound", "ufunc.reduce",
                              "instance"])
def test_callables_that_are_not_functions(backend, op):
    raises_untouched(TypeError, "not a Python function|not a supported", np.arange(10.0),
                     op, backend=backend)


def test_partial_is_refused(backend):
    import functools

    op = functools.partial(lambda a, b: a + b)
    raises_untouched(TypeError, "not a Python function", np.arange(10.0), op,
                     backend=backend)


@pytest.mark.parametrize("op", [operator.and_, operator.or_, operator.xor, "and",
                                np.bitwise_xor])
def test_bitwise_ops_on_floats(backend, op):
    raises_untouched(TypeError, "not defined for dtype float", np.arange(10.0), op,
                     backend=backend)
    with pytest.raises(TypeError, match="not defined for dtype float"):
        pyreduce.reduce(np.arange(10), op, dtype=np.float32, backend=backend)


def test_uncompilable_op_on_cpu():
    x = np.arange(10.0)
    raises_untouched(TypeError, "could not be compiled", x, lambda a, b: a + "x",
                     backend="cpu")
    raises_untouched(TypeError, "could not be compiled", x,
                     lambda a, b: os.getcwd(), backend="cpu")
    # the backend still works afterwards
    assert pyreduce.sum(x, backend="cpu") == 45.0


def test_op_returning_a_tuple_on_cpu():
    """BUG: an op Numba compiles but whose result is not a scalar (a tuple)
    fails in the generated fold with Numba's TypingError, not a TypeError."""
    x = np.arange(10.0)
    raises_untouched(TypeError, "op", x, lambda a, b: (a, b), backend="cpu")


@pytest.mark.gpu
@pytest.mark.parametrize("op, why", [
    (lambda a, b: a + "x", "could not be compiled by Numba for float64"),
    (lambda a, b: os.getcwd(), "could not be compiled"),
    (lambda a, b: (a, b), r"returns .*, not a scalar"),
    (lambda a, b: complex(a, b), "could not be compiled.*[Cc]ast"),
], ids=["string", "untyped-global", "tuple", "complex-into-float"])
def test_uncompilable_op_on_gpu(op, why):
    """The cuda backend checks a user's op by compiling ``acc_t(op(a, b))`` for
    the CUDA target (no host compile): a TypeError as on the host, before any
    launch, for a reduction, a scan and a segmented reduction alike."""
    x = np.arange(10.0)
    raises_untouched(TypeError, why, x, op, backend="cuda")
    with pytest.raises(TypeError, match=why):
        pyreduce.scan(x, op, backend="cuda")
    with pytest.raises(TypeError, match=why):
        pyreduce.segmented_reduce(x, [0, 4, 10], op, backend="cuda")
    assert pyreduce.reduce(x, lambda a, b: a + b, backend="cuda") == 45.0


@pytest.mark.gpu
def test_op_of_a_tuple_accumulator_returning_a_scalar_on_gpu():
    x = np.arange(10.0)
    with pytest.raises(TypeError, match="not a tuple"):
        pyreduce.reduce(x, lambda a, b: a[0], map=lambda i, v: (v, i),
                        dtype=(np.float64, np.int64), identity=(0.0, 0), backend="cuda")
    for op in (lambda a, b: (a[0],), lambda a, b: (complex(a[0], 1.0), a[1])):
        with pytest.raises(TypeError, match=r"could not be compiled by Numba for "
                                            r"\(float64, int64\)"):
            pyreduce.reduce(x, op, map=lambda i, v: (v, i), dtype=(np.float64, np.int64),
                            identity=(0.0, 0), backend="cuda")


# An op that Numba cannot compile must be a TypeError on the simulator too, and
# the simulator must still work afterwards. Run in a fresh interpreter with a
# time limit: a failed simulated launch has been seen to leave the simulator
# hanging on the next launch.
_SIM_SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np, pyreduce
    ops = {
        "str": lambda a, b: a + "x",
        "unsupported_call": lambda a, b: os.getcwd(),
        "tuple": lambda a, b: (a, b),
    }
    x = np.arange(int(sys.argv[2]), dtype=np.float64)
    before = x.copy()
    out = {}
    try:
        pyreduce.reduce(x, ops[sys.argv[1]], backend="sim")
        out["raised"] = None
    except Exception as exc:
        out["raised"] = type(exc).__name__
        out["is_type_error"] = isinstance(exc, TypeError)
        out["message"] = str(exc)[:500]
    out["untouched"] = bool(np.array_equal(x, before))
    sys.stdout.write(json.dumps(out) + "\\n"); sys.stdout.flush()
    out["after"] = float(pyreduce.sum(np.arange(100.0), backend="sim"))
    print(json.dumps(out))
    """
)


@pytest.mark.sim
@pytest.mark.parametrize("op,n", [("str", 5), ("unsupported_call", 5),
                                  ("unsupported_call", 300), ("tuple", 300)])
def test_uncompilable_op_on_sim(op, n):
    """Regression (pyreduce/backends/numba_cuda.py: the simulator calls the op as plain
    Python and never type-checks it): ``a + "x"`` surfaces as a WarpSimError (a
    thread died mid-shuffle) and the next simulated launch hangs; an unsupported
    call or a tuple result surface as ValueError/WarpSimError from inside the
    kernel. Expected: TypeError naming the op, as on the CPU backend."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", PYTHONPATH=REPO)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _SIM_SCRIPT, op, str(n)],
            capture_output=True, text=True, timeout=20, env=env, cwd=REPO,
        )
        lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout or b""
        out = out.decode() if isinstance(out, bytes) else out
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        first = json.loads(lines[0]) if lines else {}
        pytest.fail(f"the simulator hung after a failed op; first call: {first}")
    assert lines, proc.stderr[-2000:]
    result = json.loads(lines[-1])
    assert result["untouched"]
    assert result["raised"] is not None, "an uncompilable op gave a result"
    assert result["is_type_error"], result
    assert "op" in result["message"] and "compile" in result["message"], result
    assert result.get("after") == 4950.0, "the simulator no longer works after the error"


# --------------------------------------------------------------------------
# Dtypes and inputs


@pytest.mark.parametrize(
    "x",
    [np.array([1, 2], dtype=object), np.array([1 + 2j, 3j], dtype=np.clongdouble),
     np.array(["a", "b"]), np.array([b"a"]), np.array([1, 2], dtype="datetime64[s]"),
     np.array([1, 2], dtype="timedelta64[s]"), np.ones(3, np.longdouble),
     np.zeros(2, dtype=[("a", np.int32)])],
    ids=["object", "clongdouble", "str", "bytes", "datetime", "timedelta",
         "longdouble", "struct"],
)
def test_unsupported_dtypes(backend, x):
    raises_untouched(TypeError, "dtype .* not supported|not supported", x, "add",
                     backend=backend)
    with pytest.raises(TypeError, match="not supported"):
        pyreduce.sum(x, backend=backend)
    with pytest.raises(TypeError, match="not supported"):
        pyreduce.reduce(x, lambda a, b: a, backend=backend)


@pytest.mark.parametrize("dt", [np.clongdouble, object, np.float16, "U3", "foo"])
def test_unsupported_accumulator_dtype(backend, dt):
    raises_untouched(TypeError, "dtype", np.arange(10.0), "add", dtype=dt, backend=backend)


def test_unsupported_device_dtype():
    if "sim" not in backends.available():
        pytest.skip("needs the simulator")
    from numba import cuda

    d = cuda.to_device(np.ones(4, np.longdouble))
    with pytest.raises(TypeError, match="float128 is not supported"):
        pyreduce.sum(d, backend="sim")


@pytest.mark.parametrize(
    "x", [None, "abc", b"ab", {"a": 1}, {1, 2}, object(), (v for v in range(3))],
    ids=["None", "str", "bytes", "dict", "set", "object", "generator"],
)
def test_non_array_inputs(backend, x):
    """What NumPy would not make a numeric array of (lists, tuples and numbers
    are taken: tests/test_inputs.py)."""
    with pytest.raises(TypeError, match="expected an array"):
        pyreduce.reduce(x, "add", backend=backend)
    with pytest.raises(TypeError, match="expected an array"):
        pyreduce.sum(x, backend=backend)


# --------------------------------------------------------------------------
# identity= and initial=


BAD_VALUES = [
    # (input dtype, value, what the message must say)
    (np.float64, "1", "str"),
    (np.float64, 1j, "complex"),
    (np.float64, np.array(1.0), "ndarray"),
    (np.float64, [1.0], "list"),
    (np.int64, 1.5, "1.5"),
    (np.int64, float("nan"), "nan"),
    (np.int64, float("inf"), "inf"),
    (np.int8, 300, "does not fit"),
    (np.int8, -129, "does not fit"),
    (np.uint8, -1, "does not fit"),
    (np.uint64, 2**64, "does not fit"),
    (np.int64, 2**63, "does not fit"),
    (np.bool_, 2, "bool"),
    (np.uint8, np.int64(256), "does not fit"),
]


@pytest.mark.parametrize("dt,value,msg", BAD_VALUES,
                         ids=[f"{np.dtype(d).name}-{v!r}" for d, v, _ in BAD_VALUES])
@pytest.mark.parametrize("which", ["identity", "initial"])
def test_bad_identity_and_initial(backend, dt, value, msg, which):
    for n in (0, 5):
        x = np.ones(n, dt)
        raises_untouched(TypeError, f"{which}.*{msg}|{msg}.*{which}|{which}={msg}", x,
                         lambda a, b: a, backend=backend, **{which: value})


FLOATS_OUT_OF_RANGE = [
    (np.int64, 1e20),
    (np.int64, 2.0**63),
    (np.uint8, -1.0),
    (np.uint8, 256.0),
    (np.bool_, 2.0),
    (np.float32, 1e300),
]


@pytest.mark.parametrize("dt,value", FLOATS_OUT_OF_RANGE,
                         ids=[f"{np.dtype(d).name}-{v!r}" for d, v in FLOATS_OUT_OF_RANGE])
def test_float_values_out_of_range(dt, value):
    """Regression (pyreduce/ops.py cast_value, float branch): a float that does not fit
    the accumulator is an OverflowError from NumPy (1e20 for int64, -1.0 or
    256.0 for uint8), or is silently changed (2.0 becomes True for bool, 1e300
    becomes inf in float32), where the semantics promise a TypeError."""
    for backend in backend_names():
        for which in ("identity", "initial"):
            for n in (0, 5):
                raises_untouched(TypeError, f"{which}.*(fit|bool)", np.ones(n, dt),
                                 lambda a, b: a, backend=backend, **{which: value})


def test_good_identity_and_initial_values_are_cast(backend):
    x = np.zeros(0, np.int8)
    assert pyreduce.reduce(x, "add", identity=2.0, backend=backend) == np.int8(2)
    assert pyreduce.reduce(x, "add", initial=np.uint64(7), backend=backend) == np.int8(7)
    assert pyreduce.reduce(x, "add", initial=True, backend=backend) == np.int8(1)
    assert pyreduce.reduce(np.zeros(0, bool), "or", identity=1, backend=backend) == np.True_


# --------------------------------------------------------------------------
# Backend, variant and tuning arguments


@pytest.mark.parametrize("name", ["gpu", "CPU", "", None, "numba", 0])
def test_unknown_backend(name):
    for n in (0, 10):
        raises_untouched(ValueError, "unknown backend", np.arange(float(n)), "add",
                         backend=name)


def test_backend_not_in_this_process():
    missing = [b for b in ("cuda", "sim") if b not in backends.available()]
    for name in missing:
        with pytest.raises(RuntimeError, match=f"backend {name!r} is not available"):
            pyreduce.sum(np.arange(10.0), backend=name)


@pytest.mark.parametrize("variant", ["bogus", "", "Warp_Shuffle"])
def test_unknown_variant(gpu_backend, variant):
    raises_untouched(ValueError, "unknown variant", np.arange(1000.0), "add",
                     backend=gpu_backend, variant=variant)


@pytest.mark.parametrize("variant", [None, 1, ["naive"]])
def test_variant_not_a_name(gpu_backend, variant):
    raises_untouched(TypeError, "variant= must be a variant's name", np.arange(1000.0), "add",
                     backend=gpu_backend, variant=variant)


BAD_TUNING = [
    ("variant", "bogus", "variant"),
    ("block_size", 48, "block size"),
    ("block_size", 2048, "block size"),
    ("block_size", -64, "block size"),
    ("block_size", "64", "block size"),
    ("items_per_thread", 3, "items per thread"),
    ("items_per_thread", 64, "items per thread"),
    ("warp_size", 16, "warp size"),
    ("warp_size", 128, "warp size"),
    ("vector_loads", 1, "vector_loads"),
    ("vector_loads", "yes", "vector_loads"),
]
# found by these tests
BAD_TUNING_UNCHECKED = [
    ("block_size", 0, "block size"),
    ("block_size", 64.0, "block size"),
    ("items_per_thread", 0, "items per thread"),
    ("items_per_thread", 2.0, "items per thread"),
    ("warp_size", 0, "warp size"),
    ("warp_size", 32.0, "warp size"),
    ("max_blocks", 0, "max_blocks"),
    ("max_blocks", -1, "max_blocks"),
    ("max_blocks", 1.5, "max_blocks"),
]


@pytest.mark.parametrize("arg,value,msg", BAD_TUNING + BAD_TUNING_UNCHECKED,
                         ids=[f"{a}={v!r}" for a, v, _ in BAD_TUNING + BAD_TUNING_UNCHECKED])
def test_bad_tuning_values(arg, value, msg):
    """A Tuning is checked as it is made, whatever the backend and size it will
    tune: a wrong type is a TypeError, a value out of range a ValueError, each
    naming the field. Regression (pyreduce/planner.py make_plan), before the
    check: 0 was taken as "not given" (``tuning.x or default``), a negative
    max_blocks returned a wrong result (0.0 for a sum of 0..999) and floats
    passed the range check (64.0 == 64) and failed later with unrelated
    messages ("slice indices must be integers"), or not at all."""
    wrong_type = arg == "vector_loads" or (arg != "variant" and not isinstance(value, int))
    with pytest.raises(TypeError if wrong_type else ValueError, match=msg) as info:
        pyreduce.Tuning(**{arg: value})
    assert f"{arg}=" in str(info.value) or arg == "variant"


@pytest.mark.parametrize("arg,value,msg", [BAD_TUNING[1], BAD_TUNING_UNCHECKED[6]],
                         ids=["block_size", "max_blocks"])
def test_bad_tuning_values_through_a_call(gpu_backend, arg, value, msg):
    """Through the deprecated keywords too, before any launch (and before their
    DeprecationWarning)."""
    raises_untouched(ValueError, msg, np.arange(1000.0), "add", backend=gpu_backend,
                     **{arg: value})


def test_tuning_checked_for_empty_input():
    """Regression (pyreduce/api.py _run): an empty input returns before the plan is
    made, so any variant name was accepted."""
    for backend in backend_names():
        raises_untouched(ValueError, "unknown variant", np.zeros(0), "add", backend=backend,
                         variant="bogus")


def test_tuning_checked_on_cpu():
    """Regression (pyreduce/api.py _run): the cpu backend never looks at variant=, so a
    misspelt variant was silently ignored."""
    for n in (0, 1, 1000):
        raises_untouched(ValueError, "unknown variant", np.arange(float(n)), "add",
                         backend="cpu", variant="bogus")


def test_block_not_a_multiple_of_warp():
    if "sim" not in backends.available():
        pytest.skip("warp 64 exists only in the simulator")
    raises_untouched(ValueError, "multiple of warp size", np.arange(100.0), "add",
                     backend="sim", tuning=pyreduce.Tuning(warp_size=64, block_size=32))


@pytest.mark.gpu
def test_warp_64_refused_on_a_gpu():
    raises_untouched(ValueError, "warp size 64", np.arange(100.0), "add", backend="cuda",
                     tuning=pyreduce.Tuning(warp_size=64))


@pytest.mark.parametrize("stream, exc, msg", [
    ("s", TypeError, "stream= must be a CUDA stream .* got str"),
    (1.5, TypeError, "got float"),
    (True, TypeError, "got bool"),
    ([0], TypeError, "got list"),
    (-1, ValueError, "stream=-1 is not a stream handle"),
])
def test_bad_stream(backend, stream, exc, msg):
    x = np.random.default_rng(0).standard_normal(300)
    raises_untouched(exc, msg, x, "add", backend=backend, stream=stream)
    with pytest.raises(exc, match=msg):
        pyreduce.sum(x, axis=0, backend=backend, stream=stream)


def test_device_result_on_cpu_refused():
    raises_untouched(ValueError, "device_result", np.arange(10.0), "add", backend="cpu",
                     device_result=True)


def test_simulator_device_array_on_cpu_backend():
    """Regression (pyreduce/api.py _to_host): a simulator device array reduced with
    backend="cpu" fails with AttributeError (numba.cuda.as_cuda_array does not
    exist in the simulator) instead of copying it to the host."""
    if "sim" not in backends.available():
        pytest.skip("needs the simulator")
    from numba import cuda

    d = cuda.to_device(np.arange(10, dtype=np.int32))
    assert pyreduce.sum(d, backend="cpu") == 45


def test_reduce_class_errors(backend):
    R = pyreduce.Reduce(lambda a, b: a + b)
    with pytest.raises(TypeError, match="1D"):
        R(np.ones((2, 2)), backend=backend)
    with pytest.raises(TypeError, match="1D"):
        R([1, 2, 3], backend=backend)
    with pytest.raises(TypeError, match="two arguments"):
        pyreduce.Reduce(lambda a: a)(np.ones(3), backend=backend)
    with pytest.raises(TypeError):
        pyreduce.Reduce(None)(np.ones(3), backend=backend)
    if backend == "cpu":
        from numba import cuda

        with pytest.raises(ValueError, match="GPU"):
            R(np.ones(3), res=cuda.device_array(1), backend="cpu")
        res = np.zeros(2)  # a host res is written like a device one: res[0] only
        assert R(np.ones(3), res=res, backend="cpu") is None and res.tolist() == [3.0, 0.0]


def test_errors_leave_no_state_behind(backend):
    """After each kind of error, the same call with good arguments works."""
    x = np.arange(1, 301, dtype=np.int32)
    for bad in ({"op": None}, {"op": np.subtract}, {"identity": "a"},
                {"dtype": np.float16}, {"op": lambda a: a}):
        args = {"op": "add", **bad}
        op = args.pop("op")
        with pytest.raises((TypeError, ValueError)):
            pyreduce.reduce(x, op, backend=backend, **args)
        assert pyreduce.reduce(x, "add", backend=backend) == 45150


# --------------------------------------------------------------------------
# Every public function names itself


_X = np.arange(1.0, 7.0)


def _add(a, b):
    return a + b


#: each public function, called with good arguments and the keywords given
PUBLIC_CALLS = {
    "reduce": lambda **k: pyreduce.reduce(_X, "add", **k),
    **{name: (lambda name: lambda **k: getattr(pyreduce, name)(_X, **k))(name)  # noqa: B023
       for name in ("sum", "prod", "max", "min", "any", "all", "nanmax", "nanmin", "argmax",
                    "argmin", "minmax", "mean", "var", "std", "nansum", "nanprod", "nanmean",
                    "nanvar", "nanstd", "nanargmax", "nanargmin", "ptp", "count_nonzero",
                    "cumsum", "cumprod", "cumulative_sum", "cumulative_prod")},
    "scan": lambda **k: pyreduce.scan(_X, "add", **k),
    "segmented_reduce": lambda **k: pyreduce.segmented_reduce(_X, np.array([0, 6]), "add", **k),
    "reference": lambda **k: pyreduce.reference(_X, "add", **k),
    "explain": lambda **k: pyreduce.explain(_X, "add", **k),
    "Reduce": lambda **k: pyreduce.Reduce(_add, **k),
    "Reduce(f)": lambda **k: pyreduce.Reduce(_add)(_X, **k),
    "variant_source": lambda **k: pyreduce.variant_source("naive", **k),
    "available": lambda **k: pyreduce.available(**k),
    "cache_info": lambda **k: pyreduce.cache_info(**k),
    "cache_clear": lambda **k: pyreduce.cache_clear(**k),
    "warmup": lambda **k: pyreduce.warmup(**k),
}


def test_every_public_function_is_covered():
    import inspect

    public = {n for n in pyreduce.__all__ if callable(getattr(pyreduce, n))
              and not (inspect.isclass(getattr(pyreduce, n)) and n != "Reduce")}
    assert public <= set(PUBLIC_CALLS), public - set(PUBLIC_CALLS)


def _names_itself(name: str, exc: Exception) -> None:
    message = str(exc)
    assert message.startswith(f"{name}() got an unexpected keyword argument"), message
    assert not __import__("re").search(r"(^|\W)_", message), message


@pytest.mark.parametrize("name", sorted(PUBLIC_CALLS))
def test_unknown_keywords_name_the_public_function(name):
    """Regression: ``sum(x, where=...)``, before ``where=`` was taken, said
    "_reduce() got an unexpected keyword argument 'where'", naming a private
    function, and ``explain`` ignored unknown keywords. Every public function
    names itself."""
    with pytest.raises(TypeError) as info:
        PUBLIC_CALLS[name](whence=True)
    _names_itself(name, info.value)


@pytest.mark.parametrize("name,keyword,value", [
    ("any", "dtype", np.int8), ("all", "initial", 1), ("any", "identity", 0),
    ("sum", "op", "mul"), ("max", "masked_rule", "fold"), ("nansum", "map", _add),
    ("nanprod", "op", "add"), ("argmax", "dtype", np.float64), ("explain", "masked_rule", "x"),
])
def test_keywords_a_function_does_not_take(name, keyword, value):
    """Regression: keywords that ``reduce`` (or the function behind it) takes but
    this function does not gave "_reduce() got multiple values for keyword
    argument" or were silently ignored (nansum's map=)."""
    with pytest.raises(TypeError) as info:
        PUBLIC_CALLS[name](**{keyword: value})
    _names_itself(name, info.value)
    assert repr(keyword) in str(info.value)


@pytest.mark.parametrize("out", [[0.0], (0.0,), np.float64(0.0), "out", 0],
                         ids=["list", "tuple", "numpy scalar", "str", "int"])
def test_out_must_be_an_array(backend, out):
    """Regression: ``out=[0.0]`` on cpu said "a device out= array needs a GPU
    backend", on sim it named the backend's arrays. out= must be an array."""
    x = np.arange(6.0).reshape(2, 3)
    for call in (lambda: pyreduce.sum(x, out=out, backend=backend),
                 lambda: pyreduce.sum(x, axis=0, out=out, backend=backend),
                 lambda: pyreduce.reduce(x, "add", keepdims=True, out=out, backend=backend),
                 lambda: pyreduce.segmented_reduce(x.ravel(), np.array([0, 6]), "add", out=out,
                                                   backend=backend)):
        with pytest.raises(TypeError, match="out= must be an array"):
            call()


@pytest.mark.parametrize("stream", [object(), Exception("s"), 1.5j, {0: 1}],
                         ids=["object", "exception", "complex", "dict"])
def test_stream_must_be_a_stream(backend, stream):
    """Regression: ``stream=object()`` raised AttributeError on sim (from
    ``stream.synchronize``) and passed unnoticed on cpu. A TypeError naming
    stream=, on every backend and every kind of reduction."""
    x = np.arange(6.0).reshape(2, 3)
    for call in (lambda: pyreduce.sum(x, stream=stream, backend=backend),
                 lambda: pyreduce.sum(x, axis=1, stream=stream, backend=backend),
                 lambda: pyreduce.segmented_reduce(x.ravel(), np.array([0, 6]), "add",
                                                   stream=stream, backend=backend)):
        with pytest.raises(TypeError, match="stream="):
            call()


@pytest.mark.sim
def test_simulator_streams_are_its_own():
    """The simulator reads results back through its own streams: an int handle
    (a real GPU's) is a TypeError naming stream=, not an AttributeError; its
    streams and None work."""
    from numba import cuda

    x = np.arange(300.0)
    with pytest.raises(TypeError, match="stream=.*numba.cuda.stream"):
        pyreduce.sum(x, stream=5, backend="sim")
    for good in (None, 0, cuda.stream()):
        assert pyreduce.sum(x, stream=good, backend="sim") == x.sum()

"""kiln's numpy-style API (kiln.sum, kiln.matmul, ...; python/kiln/_numpy_api.py), generated
from the op table: every function against numpy on seeded random inputs, eagerly and inside
kiln.function; gradients under kiln.GradientTape; every default against the op table's;
numpy's axis forms; errors.

Tolerances come from float32 rounding (u = 2^-24, ulp(y) the float32 spacing at |y|), not from
runs: an exactly rounded op is within ulp(ref); kiln's transcendental functions are within 3
ulp (docs/codegen.md, "Accuracy"), taken as 4 ulp plus the input's rounding carried through
the derivative (4 u |x f'(x)|); a sum of n terms is within n u sum|x_i| (recursive summation),
a product of k terms within k u |A||B| per element."""
import inspect
import math

import numpy as np
import pytest

import kiln

U = 2.0 ** -24


def ulp(y):
    return np.spacing(np.abs(np.asarray(y, np.float32))).astype(np.float64)


def f32(rng, shape, low=None, high=None):
    if low is None:
        return rng.standard_normal(shape).astype(np.float32)
    return rng.uniform(low, high, shape).astype(np.float32)


def dfdx(f, x):
    """|x f'(x)| in float64 by central differences (only scales the tolerance)."""
    x = x.astype(np.float64)
    h = 1e-6 * np.maximum(np.abs(x), 1e-3)
    return np.abs(x * (f(x + h) - f(x - h)) / (2 * h))


def transcendental(f, ulps=4, floor=0.0):
    """(reference, tolerance) of an elementwise float32 function of one argument."""
    def case(x):
        ref = f(x.astype(np.float64))
        return ref, ulps * ulp(ref) + 4 * U * dfdx(f, x) + floor
    return case


def erf64(x):
    return np.vectorize(math.erf)(x)


def gelu64(x):
    return 0.5 * x * (1 + erf64(x / math.sqrt(2)))


def gelu_tanh64(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def softplus64(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def sigmoid64(x):
    return 1 / (1 + np.exp(-x))


# ---- one row per function: name -> builder(rng) giving (args, kwargs, reference, tolerance)
#      tolerance 0 means equal (also dtype and shape).

def unary(f64, low=None, high=None, **tc):
    case = transcendental(f64, **tc)

    def build(rng):
        x = f32(rng, (4, 5), low, high)
        ref, tol = case(x)
        return (x,), {}, ref, tol
    return build


def exact_unary(fnp, dtype=np.float32):
    def build(rng):
        x = (f32(rng, (4, 5)) * 3).astype(dtype)
        return (x,), {}, fnp(x), 0
    return build


def rounded_binary(fnp, low=None, high=None):
    def build(rng):
        a, b = f32(rng, (4, 5), low, high), f32(rng, (1, 5), low, high)  # broadcasting
        ref = fnp(a.astype(np.float64), b.astype(np.float64))
        return (a, b), {}, ref, ulp(ref)
    return build


def exact_binary(fnp, dtype=np.float32):
    def build(rng):
        a = np.round(f32(rng, (4, 5)) * 2).astype(dtype)
        b = np.round(f32(rng, (4, 1)) * 2).astype(dtype)
        return (a, b), {}, fnp(a, b), 0
    return build


def logical(fnp):
    def build(rng):
        a, b = rng.random((3, 4)) < 0.5, rng.random((3, 4)) < 0.5
        return (a, b), {}, fnp(a, b), 0
    return build


def reduction(fnp, kind, **kwargs):
    """kind: "sum" (n u sum|x|), "mean" (the same over n), "exact", "prod", "lse"."""
    def build(rng):
        x = f32(rng, (3, 4, 5), 0.5, 1.5) if kind == "prod" else f32(rng, (3, 4, 5))
        axis = kwargs.get("axis")
        x64 = x.astype(np.float64)
        ref = fnp(x if kind == "exact" else x64, **kwargs)
        n = x.size // np.size(ref)
        if kind == "exact":
            tol = 0
        elif kind == "sum":
            tol = (n + 1) * U * np.sum(np.abs(x64), axis=axis, keepdims=kwargs.get("keepdims",
                                                                                  False))
        elif kind == "mean":
            tol = (n + 2) * U * np.mean(np.abs(x64), axis=axis,
                                        keepdims=kwargs.get("keepdims", False))
        elif kind == "prod":
            tol = 2 * (n + 1) * U * np.abs(ref)
        else:  # logsumexp: exp to 4 ulp, the sum, the log (4 ulp) and the max added back
            tol = 2 * U * (n + 8) + 8 * ulp(ref) + U * np.abs(ref)
        return (x,), dict(kwargs), ref, tol
    return build


def lse64(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    out = m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))
    if not keepdims:
        out = np.squeeze(out, axis=axis) if axis is not None else out.reshape(())
    return out


def softmax_case(log):
    def build(rng):
        x = f32(rng, (3, 6))
        x64 = x.astype(np.float64)
        m = x64.max(axis=-1, keepdims=True)
        e = np.exp(x64 - m)
        s = e.sum(axis=-1, keepdims=True)
        n = x.shape[-1]
        if log:
            ref = x64 - m - np.log(s)
            tol = 2 * U * (np.abs(x64 - m) + n + 8 + np.abs(ref))
        else:
            ref = e / s
            tol = 2 * U * (n + 20 + np.abs(x64 - m)) * ref
        return (x,), {}, ref, tol
    return build


def matmul_case(rng):
    a, b = f32(rng, (2, 3, 4)), f32(rng, (4, 5))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    return (a, b), {}, a64 @ b64, (4 + 2) * U * (np.abs(a64) @ np.abs(b64))


def conv2d_ref(x, w, stride=1):
    n, h, wd, c = x.shape
    kh, kw, _, o = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, oh, ow, o))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride:i * stride + kh, j * stride:j * stride + kw, :]
            out[:, i, j, :] = np.tensordot(patch, w, axes=([1, 2, 3], [0, 1, 2]))
    return out


def conv2d_case(rng):
    x, w = f32(rng, (2, 5, 5, 3)), f32(rng, (3, 3, 3, 4))
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = conv2d_ref(x64, w64)
    return (x, w), {}, ref, (27 + 2) * U * conv2d_ref(np.abs(x64), np.abs(w64))


def pool_ref(x, p, reduce):
    n, h, w, c = x.shape
    out = np.zeros((n, h // p, w // p, c))
    for i in range(h // p):
        for j in range(w // p):
            out[:, i, j, :] = reduce(x[:, i * p:(i + 1) * p, j * p:(j + 1) * p, :], axis=(1, 2))
    return out


def max_pool_case(rng):
    x = f32(rng, (2, 4, 6, 3))
    return (x,), {"pool_size": (2, 2)}, pool_ref(x, 2, np.max).astype(np.float32), 0


def avg_pool_case(rng):
    x = f32(rng, (2, 4, 6, 3))
    x64 = x.astype(np.float64)
    return ((x,), {"pool_size": (2, 2)}, pool_ref(x64, 2, np.mean),
            (4 + 2) * U * pool_ref(np.abs(x64), 2, np.mean))


def attention_case(rng):
    q, k, v = f32(rng, (2, 3, 4)), f32(rng, (2, 5, 4)), f32(rng, (2, 5, 4))
    q64, k64, v64 = (t.astype(np.float64) for t in (q, k, v))
    s = q64 @ np.swapaxes(k64, -1, -2) / 2.0  # scale 1/sqrt(4)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    p /= p.sum(axis=-1, keepdims=True)
    ref = p @ v64
    tv, d = 5, 4
    big = np.max(np.abs(s - m)) + np.max(np.abs(q64)) * np.max(np.abs(k64)) * d / 2
    tol = 2 * U * (tv + d + 30 + big) * (p @ np.abs(v64))
    return (q, k, v), {}, ref, tol


def where_case(rng):
    c = rng.random((3, 4)) < 0.5
    x, y = f32(rng, (3, 4)), f32(rng, (1, 4))
    return (c, x, y), {}, np.where(c, x, y), 0


def concat_case(rng):
    a, b = f32(rng, (2, 3)), f32(rng, (4, 3))
    return ([a, b],), {}, np.concatenate([a, b]), 0


def cast_case(rng):
    x = f32(rng, (3, 4)) * 10
    return (x, "int32"), {}, x.astype(np.int32), 0


def gather_case(rng):
    x = f32(rng, (4, 3))
    idx = np.array([3, 0, 0, 2], np.int32)
    return (x, idx), {}, np.take(x, idx, axis=0), 0


def scatter_add_case(rng):
    upd = np.round(f32(rng, (4, 3)) * 4)  # small integers: every sum is exact
    idx = np.array([1, 0, 1, 3], np.int32)
    ref = np.zeros((5, 3), np.float32)
    np.add.at(ref, idx, upd)
    return (upd, idx, 0, 5), {}, ref, 0


def one_hot_case(rng):
    idx = np.array([0, 2, 1, 2], np.int32)
    return (idx, 3), {}, np.eye(3, dtype=np.float32)[idx], 0


def slice_case(rng):
    x = f32(rng, (4, 6))
    return (x, (1, 0), (3, 5)), {}, x[1:3, 0:5], 0


def pow_case(rng):
    a, b = f32(rng, (4, 5), 0.5, 2.0), f32(rng, (4, 5), -2.0, 2.0)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    ref = a64 ** b64
    return (a, b), {}, ref, 4 * ulp(ref) + 4 * U * np.abs(ref) * (np.abs(b64) +
                                                                  np.abs(b64 * np.log(a64)))


def leaky_relu_case(rng):
    x = f32(rng, (4, 5))
    ref = np.where(x >= 0, x, 0.2 * x.astype(np.float64))
    return (x,), {}, ref, ulp(ref)


def rsqrt_case(rng):
    x = f32(rng, (4, 5), 0.1, 10)
    ref = 1 / np.sqrt(x.astype(np.float64))
    return (x,), {}, ref, 4 * ulp(ref)


def sqrt_case(rng):
    x = f32(rng, (4, 5), 0.0, 10)
    ref = np.sqrt(x.astype(np.float64))
    return (x,), {}, ref, ulp(ref)


def square_case(rng):
    x = f32(rng, (4, 5))
    ref = np.square(x.astype(np.float64))
    return (x,), {}, ref, ulp(ref)


CASES = {
    "add": rounded_binary(np.add),
    "subtract": rounded_binary(np.subtract),
    "multiply": rounded_binary(np.multiply),
    "divide": rounded_binary(np.divide, 0.5, 2.0),
    "power": pow_case,
    "maximum": exact_binary(np.maximum),
    "minimum": exact_binary(np.minimum),
    "equal": exact_binary(np.equal, np.int32),
    "not_equal": exact_binary(np.not_equal, np.int32),
    "less": exact_binary(np.less),
    "less_equal": exact_binary(np.less_equal),
    "greater": exact_binary(np.greater),
    "greater_equal": exact_binary(np.greater_equal),
    "logical_and": logical(np.logical_and),
    "logical_or": logical(np.logical_or),
    "negative": exact_unary(np.negative),
    "abs": exact_unary(np.abs),
    "sign": exact_unary(np.sign),
    "square": square_case,
    "sqrt": sqrt_case,
    "rsqrt": rsqrt_case,
    "exp": unary(np.exp),
    "log": unary(np.log, 0.1, 10),
    "log1p": unary(np.log1p, -0.5, 10),
    "tanh": unary(np.tanh),
    "sigmoid": unary(sigmoid64),
    "relu": exact_unary(lambda x: np.maximum(x, 0)),
    "leaky_relu": leaky_relu_case,
    # gelu: an absolute error of 2.5 * 2^-24 where |gelu| < 1 (docs/codegen.md)
    "gelu": unary(gelu64, floor=4 * U),
    "erf": unary(erf64),
    "softplus": unary(softplus64),
    "logical_not": lambda rng: ((rng.random((3, 4)) < 0.5,), {}, None, "logical_not"),
    "cast": cast_case,
    "where": where_case,
    "sum": reduction(np.sum, "sum"),
    "mean": reduction(np.mean, "mean"),
    "max": reduction(np.max, "exact"),
    "min": reduction(np.min, "exact"),
    "prod": reduction(np.prod, "prod"),
    "logsumexp": reduction(lse64, "lse"),
    "argmax": reduction(np.argmax, "exact"),
    "argmin": reduction(np.argmin, "exact"),
    "softmax": softmax_case(log=False),
    "log_softmax": softmax_case(log=True),
    "matmul": matmul_case,
    "conv2d": conv2d_case,
    "attention": attention_case,
    "max_pool2d": max_pool_case,
    "avg_pool2d": avg_pool_case,
    "reshape": lambda rng: ((np.arange(12, dtype=np.float32), (3, -1)), {},
                            np.arange(12, dtype=np.float32).reshape(3, -1), 0),
    "copy": exact_unary(np.copy),
    "transpose": lambda rng: ((np.arange(24, dtype=np.float32).reshape(2, 3, 4),), {},
                              np.arange(24, dtype=np.float32).reshape(2, 3, 4).T, 0),
    "broadcast_to": lambda rng: ((np.arange(3, dtype=np.float32), (2, 3)), {},
                                 np.broadcast_to(np.arange(3, dtype=np.float32), (2, 3)), 0),
    "concatenate": concat_case,
    "slice": slice_case,
    "gather": gather_case,
    "scatter_add": scatter_add_case,
    "one_hot": one_hot_case,
    "squeeze": lambda rng: ((np.ones((1, 3, 1), np.float32),), {}, np.ones(3, np.float32), 0),
    "expand_dims": lambda rng: ((np.ones((2, 3), np.float32), 1), {},
                                np.ones((2, 1, 3), np.float32), 0),
    "stack": lambda rng: (([np.zeros(3, np.float32), np.ones(3, np.float32)],), {"axis": 1},
                          np.stack([np.zeros(3), np.ones(3)], axis=1).astype(np.float32), 0),
}


def run_case(name, seed=0):
    rng = np.random.default_rng(seed)
    args, kwargs, ref, tol = CASES[name](rng)
    if isinstance(tol, str):  # logical_not
        ref, tol = np.logical_not(args[0]), 0
    return args, kwargs, ref, tol


def check(name, got, ref, tol):
    got = np.asarray(got.numpy() if hasattr(got, "numpy") else got)
    ref = np.asarray(ref)
    assert got.shape == ref.shape, (name, got.shape, ref.shape)
    if np.isscalar(tol) and tol == 0:
        assert got.dtype == ref.dtype, (name, got.dtype, ref.dtype)
        np.testing.assert_array_equal(got, ref, err_msg=name)
    else:
        err = np.abs(got.astype(np.float64) - ref)
        bad = err > tol
        assert not bad.any(), (f"{name}: error {err[bad].max()} over the bound "
                               f"{np.broadcast_to(tol, err.shape)[bad].min()}")


def test_every_function_has_a_row_and_no_internal_op_is_exported():
    assert set(kiln.numpy_api) == set(CASES)
    for internal in ("max_pool2d_grad", "conv2d_backprop_input", "attention_grad",
                     "element_count", "broadcast_like", "all_reduce", "random_normal", "select",
                     "concat", "neg", "pow", "sub", "mul", "div", "pad"):
        assert not hasattr(kiln, internal), internal
    # kiln.ops stays the raw table
    assert "select" in kiln.ops.__all__ and "max_pool2d_grad" in kiln.ops.__all__


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy_eagerly(name):
    for seed in (0, 1):
        args, kwargs, ref, tol = run_case(name, seed)
        check(name, getattr(kiln, name)(*args, **kwargs), ref, tol)


def _split(args):
    """The positions of the array arguments (traced); the rest are static, closed over."""
    return [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_against_numpy_inside_kiln_function(name):
    args, kwargs, ref, tol = run_case(name, 3)
    fn = getattr(kiln, name)
    if isinstance(args[0], list):  # a list of arrays: each one traced
        n = len(args[0])

        @kiln.function
        def traced(*xs):
            return fn(list(xs[:n]), *args[1:], **kwargs)
        got = traced(*args[0])
    else:
        arrays = _split(args)

        @kiln.function
        def traced(*xs):
            full = list(args)
            for i, x in zip(arrays, xs):
                full[i] = x
            return fn(*full, **kwargs)
        got = traced(*[args[i] for i in arrays])
    check(name, got, ref, tol)


# ---- defaults, signatures, axis forms

def test_signatures_follow_numpy():
    sig = lambda f: str(inspect.signature(f))  # noqa: E731
    assert sig(kiln.sum) == "(a, axis=None, keepdims=False)"
    assert sig(kiln.mean) == "(a, axis=None, keepdims=False)"
    assert sig(kiln.argmax) == "(a, axis=None, keepdims=False)"
    assert sig(kiln.softmax) == "(a, axis=-1)"
    assert sig(kiln.matmul) == "(x1, x2, transpose_a=False, transpose_b=False)"
    assert sig(kiln.transpose) == "(a, axes=None)"
    assert sig(kiln.reshape) == "(a, newshape)"
    assert sig(kiln.concatenate) == "(arrays, axis=0)"
    assert sig(kiln.where) == "(condition, x, y)"
    assert sig(kiln.tanh) == "(x)"
    assert sig(kiln.add) == "(x1, x2)"
    assert sig(kiln.gelu) == "(x, approximate=False)"
    assert sig(kiln.leaky_relu) == "(x, alpha=0.2)"
    assert sig(kiln.one_hot) == "(indices, depth, dtype='float32')"
    assert sig(kiln.max_pool2d) == "(a, pool_size, strides=None, padding='valid')"
    assert sig(kiln.conv2d) == ("(input, filter, strides=(1, 1), dilations=(1, 1), "
                                "padding='valid')")
    assert sig(kiln.attention) == "(query, key, value, mask=None, scale=None, causal=False)"
    assert kiln.sum.__name__ == "sum" and "axis" in kiln.sum.__doc__
    assert "kiln.ops.select" in kiln.where.__doc__


def test_every_default_is_the_op_tables():
    from kiln import _numpy_api as api
    rows = {r["name"]: r for r in kiln.op_table()}
    checked = 0
    for name in kiln.numpy_api:
        fn = getattr(kiln, name)
        op = getattr(fn, "_kiln_op", None)
        if op is None:
            continue  # squeeze, expand_dims, stack: compositions
        params = inspect.signature(fn).parameters
        for a in rows[op]["attrs"]:
            reduction = "reduction" in rows[op]["traits"]
            if reduction and a["name"] in ("axes", "axis"):
                assert params["axis"].default is None  # numpy: None (all / flattened)
                continue
            pname = api.ATTRIBUTE_NAMES.get((op, a["name"]), a["name"])
            default = params[pname].default
            if (op, a["name"]) in api.COMPUTED_DEFAULTS:
                assert default is None and not a["has_default"], (op, a["name"])
            elif a["has_default"]:
                assert default == a["default"], (op, a["name"], default, a["default"])
                checked += 1
            else:
                assert default is inspect.Parameter.empty, (op, a["name"])
    assert checked >= 15


def test_defaulted_calls_equal_the_raw_ops_with_the_tables_defaults():
    rng = np.random.default_rng(5)
    x = kiln.tensor(f32(rng, (3, 4)))
    y = kiln.tensor(f32(rng, (4, 2)))
    same = lambda a, b: np.testing.assert_array_equal(a.numpy(), b.numpy())  # noqa: E731
    same(kiln.sum(x), kiln.ops.sum(x, axes=[], keepdims=False))
    same(kiln.max(x), kiln.ops.max(x, axes=[], keepdims=False))
    same(kiln.logsumexp(x), kiln.ops.logsumexp(x, axes=[], keepdims=False))
    same(kiln.softmax(x), kiln.ops.softmax(x, axis=-1))
    same(kiln.log_softmax(x), kiln.ops.log_softmax(x, axis=-1))
    same(kiln.matmul(x, y), kiln.ops.matmul(x, y, transpose_a=False, transpose_b=False))
    same(kiln.gelu(x), kiln.ops.gelu(x, approximate=False))
    same(kiln.leaky_relu(x), kiln.ops.leaky_relu(x, alpha=0.2))
    same(kiln.transpose(x), kiln.ops.transpose(x, perm=[1, 0]))
    same(kiln.concatenate([x, x]), kiln.ops.concat(x, x, axis=0))
    same(kiln.argmax(x, axis=-1), kiln.ops.argmax(x, axis=-1, keepdims=False))


@pytest.mark.parametrize("axis", [None, 0, 1, -1, -3, (0, 2), (2, -3), [1], ()])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "logsumexp"])
def test_axis_forms_against_numpy(name, axis, keepdims):
    rng = np.random.default_rng(7)
    x = f32(rng, (3, 4, 5), 0.5, 1.5)
    fnp = lse64 if name == "logsumexp" else getattr(np, name)
    ax = tuple(axis) if isinstance(axis, list) else axis
    if name == "logsumexp" and ax == ():
        ref = x.astype(np.float64)
    else:
        ref = fnp(x.astype(np.float64), axis=ax, keepdims=keepdims)
    got = getattr(kiln, name)(x, axis=axis, keepdims=keepdims)
    n = x.size // max(np.size(ref), 1)
    tol = 2 * (n + 8) * U * np.abs(ref) + 8 * ulp(ref)  # positive inputs: relative bounds
    check(name, got, ref, tol)
    # positionally, as numpy allows: kiln.sum(x, 1, True)
    if axis is not None:
        check(name, getattr(kiln, name)(x, axis, keepdims), ref, tol)


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions_axis_none_is_the_flattened_array(name, axis, keepdims):
    rng = np.random.default_rng(8)
    x = f32(rng, (3, 4))
    ref = getattr(np, name)(x, axis=axis, keepdims=keepdims)
    got = getattr(kiln, name)(x, axis=axis, keepdims=keepdims).numpy()
    assert got.shape == ref.shape
    np.testing.assert_array_equal(got, ref)


def test_numpy_semantics_beyond_the_op():
    rng = np.random.default_rng(9)
    a, b = f32(rng, (3, 4)), f32(rng, (4,))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # matmul of a vector, as numpy: (3, 4) @ (4,) -> (3,), (4,) @ (4, 3) -> (3,), (4,) @ (4,) -> ()
    check("matmul", kiln.matmul(a, b), a64 @ b64, 6 * U * (np.abs(a64) @ np.abs(b64)))
    check("matmul", kiln.matmul(b, a.T), b64 @ a64.T, 6 * U * (np.abs(b64) @ np.abs(a64.T)))
    check("matmul", kiln.matmul(b, b), b64 @ b64, 6 * U * (np.abs(b64) @ np.abs(b64)))
    # concatenate(axis=None) flattens
    np.testing.assert_array_equal(kiln.concatenate([a, b], axis=None).numpy(),
                                  np.concatenate([a, b], axis=None))
    # ints for shapes, tuples for perms
    np.testing.assert_array_equal(kiln.reshape(a, 12).numpy(), a.reshape(12))
    np.testing.assert_array_equal(kiln.transpose(a, (1, 0)).numpy(), a.T)
    np.testing.assert_array_equal(kiln.broadcast_to(b, (2, 4)).numpy(),
                                  np.broadcast_to(b, (2, 4)))
    # Python scalars take the tensor's dtype, numpy arrays are accepted
    np.testing.assert_array_equal(kiln.add(a, 1).numpy(), a + np.float32(1))
    assert kiln.maximum(np.arange(3, dtype=np.int64), 1).dtype == "int64"
    # Variables work where tensors do
    v = kiln.Variable(a)
    np.testing.assert_array_equal(kiln.max(v, axis=1).numpy(), a.max(axis=1))
    np.testing.assert_array_equal(kiln.sum(v, axis=()).numpy(), a)


def test_errors_are_kiln_errors_with_clear_messages():
    x = kiln.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(kiln.ArgumentError, match=r"kiln\.sum.*unexpected keyword.*axes"):
        kiln.sum(x, axes=[0])
    with pytest.raises(kiln.Error, match="axis must be None, an int or a tuple of ints"):
        kiln.sum(x, axis="0")
    with pytest.raises(kiln.Error, match="axis must be None, an int or a tuple of ints"):
        kiln.mean(x, axis=1.5)
    with pytest.raises(kiln.Error, match="missing a required argument: 'x2'"):
        kiln.add(x)
    with pytest.raises(kiln.Error, match="newshape must be an int or a sequence of ints"):
        kiln.reshape(x, "6")
    with pytest.raises(kiln.Error, match="must be a bool"):
        kiln.sum(x, keepdims=1)
    with pytest.raises(kiln.Error, match="too many positional arguments"):
        kiln.tanh(x, x)
    with pytest.raises(kiln.DTypeError, match="kiln.divide: numpy divides integers"):
        kiln.divide(np.arange(3, dtype=np.int32), 2)
    with pytest.raises(kiln.DTypeError):
        kiln.mean(np.arange(3, dtype=np.int32), axis=())
    with pytest.raises(kiln.Error, match="inner dimensions"):
        kiln.matmul(x, x)
    # ArgumentError is a kiln.Error and a TypeError
    assert issubclass(kiln.ArgumentError, kiln.Error) and issubclass(kiln.ArgumentError, TypeError)


# ---- gradients: the functions record on a tape like any op

def test_gradients_under_a_tape():
    rng = np.random.default_rng(11)
    x0, w0 = f32(rng, (3, 4)), f32(rng, (4, 2))
    x, w = kiln.tensor(x0), kiln.tensor(w0)
    with kiln.GradientTape(persistent=True) as tape:
        tape.watch(x)
        tape.watch(w)
        h = kiln.tanh(kiln.matmul(x, w))
        loss = kiln.sum(kiln.softmax(h, axis=0) * h) + kiln.mean(kiln.square(x), axis=(0, 1))
    gx, gw = tape.gradient(loss, [x, w])

    def loss64(x, w):
        h = np.tanh(x @ w)
        e = np.exp(h - h.max(axis=0))
        return np.sum(e / e.sum(axis=0) * h) + np.mean(x ** 2)

    x64, w64 = x0.astype(np.float64), w0.astype(np.float64)
    for g, arg, shape in ((gx, 0, x0.shape), (gw, 1, w0.shape)):
        fd = np.zeros(shape)
        for i in np.ndindex(*shape):
            d = np.zeros(shape)
            d[i] = 1e-6
            args_p, args_m = [x64, w64], [x64, w64]
            args_p[arg] = args_p[arg] + d
            args_m[arg] = args_m[arg] - d
            fd[i] = (loss64(*args_p) - loss64(*args_m)) / 2e-6
        # float32 forward and backward: errors of a few u times the magnitudes involved
        np.testing.assert_allclose(g.numpy(), fd, rtol=0, atol=64 * U * (1 + np.abs(fd).max()))

    with kiln.GradientTape() as tape:
        tape.watch(x)
        y = kiln.sum(kiln.where(x0 > 0, x, kiln.negative(x)))  # |x|
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), np.sign(x0))


def test_a_tape_inside_kiln_function():
    rng = np.random.default_rng(12)
    x0 = f32(rng, (3, 4))

    @kiln.function
    def grad(x):
        with kiln.GradientTape() as tape:
            tape.watch(x)
            y = kiln.sum(kiln.square(x), axis=None)
        return tape.gradient(y, x)

    np.testing.assert_allclose(grad(x0).numpy(), 2 * x0, rtol=U, atol=0)

"""kiln.keras.ops: Keras 3's ``keras.ops`` names over kiln's numpy-style API (kiln.sum,
kiln.matmul, ...; kiln/_numpy_api.py), with Keras' argument names and defaults. They work
eagerly, under kiln.GradientTape and inside kiln.function.

Only what kiln computes as Keras defines it is here; the rest of keras.ops (sort, top_k,
einsum, fft, ...) is absent (an AttributeError), never approximated. Where Keras and kiln's
ops differ in a corner this module does not cover, the call is a kiln.Error: ``conv`` and the
pools take channels-last 4-D inputs only, ``one_hot(sparse=True)``, ``where`` with one
argument and ``while_loop(maximum_iterations=)`` are refused. Dtypes are never promoted:
mixing float32 and float64 is a kiln.DTypeError (Keras would promote)."""
import numpy as _np

import kiln as _k

from .. import _kiln

_Error = _kiln.Error

# ---- the numpy-style functions Keras names the same (same arguments, same defaults)
abs = _k.abs  # noqa: A001
absolute = _k.abs
negative = _k.negative
sign = _k.sign
square = _k.square
sqrt = _k.sqrt
rsqrt = _k.rsqrt
exp = _k.exp
log = _k.log
log1p = _k.log1p
tanh = _k.tanh
sigmoid = _k.sigmoid
relu = _k.relu
softplus = _k.softplus
erf = _k.erf
logical_not = _k.logical_not
add = _k.add
subtract = _k.subtract
multiply = _k.multiply
divide = _k.divide
true_divide = _k.divide
power = _k.power
maximum = _k.maximum
minimum = _k.minimum
equal = _k.equal
not_equal = _k.not_equal
less = _k.less
less_equal = _k.less_equal
greater = _k.greater
greater_equal = _k.greater_equal
logical_and = _k.logical_and
logical_or = _k.logical_or
matmul = _k.matmul
sum = _k.sum  # noqa: A001
mean = _k.mean
prod = _k.prod
logsumexp = _k.logsumexp
argmax = _k.argmax
argmin = _k.argmin
softmax = _k.softmax
log_softmax = _k.log_softmax
cast = _k.cast
transpose = _k.transpose
expand_dims = _k.expand_dims
squeeze = _k.squeeze
concatenate = _k.concatenate
stack = _k.stack
broadcast_to = _k.broadcast_to
copy = _k.copy


def reshape(x, newshape):
    """Keras' reshape(x, newshape): one dimension may be -1."""
    return _k.reshape(x, newshape)


def gelu(x, approximate=True):
    """Keras' gelu: the tanh approximation by default (approximate=False: x * Phi(x))."""
    return _k.gelu(x, approximate=approximate)


def leaky_relu(x, negative_slope=0.2):
    """x where x >= 0, negative_slope * x elsewhere."""
    return _k.leaky_relu(x, alpha=negative_slope)


def silu(x):
    """x * sigmoid(x)."""
    return _k.multiply(x, _k.sigmoid(x))


swish = silu


def relu6(x):
    """min(max(x, 0), 6)."""
    return _k.minimum(_k.relu(x), 6)


def hard_sigmoid(x):
    """relu6(x + 3) / 6."""
    return _k.divide(relu6(_k.add(x, 3)), 6)


def log_sigmoid(x):
    """-softplus(-x)."""
    return _k.negative(_k.softplus(_k.negative(x)))


def max(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    """The maximum over `axis` (None: all), at least `initial` when given."""
    out = _k.max(x, axis=axis, keepdims=keepdims)
    return out if initial is None else _k.maximum(out, initial)


def min(x, axis=None, keepdims=False, initial=None):  # noqa: A001
    """The minimum over `axis` (None: all), at most `initial` when given."""
    out = _k.min(x, axis=axis, keepdims=keepdims)
    return out if initial is None else _k.minimum(out, initial)


def var(x, axis=None, keepdims=False):
    """The variance over `axis`: mean(square(x - mean(x))), as numpy computes it."""
    m = _k.mean(x, axis=axis, keepdims=True)
    return _k.mean(_k.square(_k.subtract(x, m)), axis=axis, keepdims=keepdims)


def std(x, axis=None, keepdims=False):
    """sqrt(var(x, axis, keepdims))."""
    return _k.sqrt(var(x, axis=axis, keepdims=keepdims))


def any(x, axis=None, keepdims=False):  # noqa: A001
    """Whether any element along `axis` is non-zero (a bool tensor)."""
    nonzero = _k.cast(_k.not_equal(x, _zero_like(x)), "int32")
    return _k.greater(_k.max(nonzero, axis=axis, keepdims=keepdims), 0)


def all(x, axis=None, keepdims=False):  # noqa: A001
    """Whether every element along `axis` is non-zero (a bool tensor)."""
    nonzero = _k.cast(_k.not_equal(x, _zero_like(x)), "int32")
    return _k.greater(_k.min(nonzero, axis=axis, keepdims=keepdims), 0)


def _zero_like(x):
    x = convert_to_tensor(x)
    return _kiln.tensor(_np.zeros((), dtype=x.dtype))


def clip(x, x_min, x_max):
    """minimum(maximum(x, x_min), x_max)."""
    return _k.minimum(_k.maximum(x, x_min), x_max)


def where(condition, x1=None, x2=None):
    """x1 where condition, x2 elsewhere (broadcast). The one-argument form is not supported."""
    if x1 is None or x2 is None:
        raise _Error("keras.ops.where: kiln needs both x1 and x2 (the one-argument form, "
                    "numpy.nonzero, has a data-dependent shape)")
    return _k.where(condition, x1, x2)


def one_hot(x, num_classes, axis=-1, dtype=None, sparse=False):
    """One-hot vectors of `num_classes` along `axis` (dtype None: float32); an index outside
    [0, num_classes) gives a row of zeros."""
    if sparse:
        raise _Error("keras.ops.one_hot: sparse=True is not supported (kiln has no sparse "
                    "tensors)")
    out = _k.one_hot(x, num_classes, dtype=dtype or "float32")
    rank = out.ndim
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise _Error(f"keras.ops.one_hot: axis {axis} is out of range for a result of rank {rank}")
    return out if a == rank - 1 else moveaxis(out, -1, a)


def take(x, indices, axis=None):
    """Elements of `x` at `indices` along `axis` (None: of the flattened x); indices must lie
    in [0, size) (kiln does not wrap negative ones)."""
    if axis is None:
        return _k.gather(_k.reshape(x, -1), indices, axis=0)
    return _k.gather(x, indices, axis=axis)


def moveaxis(x, source, destination):
    """The axes `source` moved to `destination` (ints or sequences of ints)."""
    x = convert_to_tensor(x)
    n = x.ndim
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise _Error(f"keras.ops.moveaxis: source {source} and destination {destination} differ "
                    "in length")
    src = [s + n if s < 0 else s for s in src]
    dst = [d + n if d < 0 else d for d in dst]
    order = [a for a in range(n) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _k.transpose(x, order)


def swapaxes(x, axis1, axis2):
    """The axes axis1 and axis2 exchanged."""
    x = convert_to_tensor(x)
    order = list(range(x.ndim))
    order[axis1], order[axis2] = order[axis2], order[axis1]
    return _k.transpose(x, order)


def convert_to_tensor(x, dtype=None, sparse=None):
    """A kiln.Tensor of `x` (a Tensor, Variable, numpy array, list or scalar), cast to `dtype`
    when given. Python floats become float32 (Keras' floatx)."""
    if sparse:
        raise _Error("keras.ops.convert_to_tensor: sparse=True is not supported")
    if isinstance(x, _kiln.Tensor):
        return x if dtype is None or x.dtype == _np.dtype(dtype).name else _k.cast(x, dtype)
    if isinstance(x, _kiln.Variable):
        t = _k.copy(x)
        return t if dtype is None else _k.cast(t, dtype)
    return _kiln.tensor(x, dtype=dtype)


def shape(x):
    """The shape as a tuple (None for a dimension unknown while tracing)."""
    return tuple(convert_to_tensor(x).shape) if not hasattr(x, "shape") else tuple(x.shape)


def ndim(x):
    """The number of axes."""
    return len(shape(x))


def size(x):
    """The number of elements."""
    return int(_np.prod(shape(x), dtype=_np.int64))


def zeros(shape, dtype=None):
    """A tensor of zeros (dtype None: float32)."""
    return _kiln.tensor(_np.zeros(shape, dtype=dtype or "float32"))


def ones(shape, dtype=None):
    """A tensor of ones (dtype None: float32)."""
    return _kiln.tensor(_np.ones(shape, dtype=dtype or "float32"))


def full(shape, fill_value, dtype=None):
    """A tensor of `fill_value` (dtype None: float32)."""
    return _kiln.tensor(_np.full(shape, fill_value, dtype=dtype or "float32"))


def _known_shape(x, fn):
    s = shape(x)
    if _builtins_any(d is None for d in s):
        raise _Error(f"keras.ops.{fn}: the shape {s} has unknown dimensions")
    return s


def _builtins_any(it):
    for v in it:
        if v:
            return True
    return False


def zeros_like(x, dtype=None):
    """Zeros of x's shape and dtype (or `dtype`)."""
    return zeros(_known_shape(x, "zeros_like"), dtype or convert_to_tensor(x).dtype)


def ones_like(x, dtype=None):
    """Ones of x's shape and dtype (or `dtype`)."""
    return ones(_known_shape(x, "ones_like"), dtype or convert_to_tensor(x).dtype)


def full_like(x, fill_value, dtype=None):
    """`fill_value` in x's shape and dtype (or `dtype`)."""
    return full(_known_shape(x, "full_like"), fill_value, dtype or convert_to_tensor(x).dtype)


def arange(start, stop=None, step=1, dtype=None):
    """numpy.arange; dtype None: int32 for int arguments, float32 otherwise (Keras)."""
    if dtype is None:
        ints = _builtins_all(isinstance(v, (int, _np.integer)) for v in (start, stop, step)
                            if v is not None)
        dtype = "int32" if ints else "float32"
    return _kiln.tensor(_np.arange(start, stop, step, dtype=dtype))


def _builtins_all(it):
    for v in it:
        if not v:
            return False
    return True


def slice(inputs, start_indices, shape):  # noqa: A001
    """inputs[start:start + shape] per axis (Keras' slice)."""
    start = [int(s) for s in start_indices]
    stop = [s + int(n) for s, n in zip(start, shape)]
    return _k.slice(inputs, start, stop)


def _four_d(fn, inputs, data_format):
    if data_format not in (None, "channels_last"):
        raise _Error(f"keras.ops.{fn}: data_format {data_format!r} is not supported here "
                    "(channels_last only)")
    if convert_to_tensor(inputs).ndim != 4:
        raise _Error(f"keras.ops.{fn}: kiln supports 4-D (2-D spatial) inputs only, got rank "
                    f"{convert_to_tensor(inputs).ndim}")


def _pair(v):
    return [int(v), int(v)] if isinstance(v, (int, _np.integer)) else [int(i) for i in v]


def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
    """2-D convolution: inputs NHWC, kernel HWIO (Keras' layout)."""
    _four_d("conv", inputs, data_format)
    return _k.conv2d(inputs, kernel, strides=_pair(strides), dilations=_pair(dilation_rate),
                     padding=padding.lower())


def max_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """2-D max pooling over NHWC inputs (strides None: pool_size)."""
    _four_d("max_pool", inputs, data_format)
    return _k.max_pool2d(inputs, _pair(pool_size), None if strides is None else _pair(strides),
                         padding.lower())


def average_pool(inputs, pool_size, strides=None, padding="valid", data_format=None):
    """2-D average pooling over NHWC inputs (strides None: pool_size)."""
    _four_d("average_pool", inputs, data_format)
    return _k.avg_pool2d(inputs, _pair(pool_size), None if strides is None else _pair(strides),
                         padding.lower())


def cond(pred, true_fn, false_fn):
    """true_fn() if pred else false_fn(); traced as one cond node inside kiln.function."""
    return _k.cond(pred, true_fn, false_fn)


def while_loop(cond, body, loop_vars, maximum_iterations=None):
    """Runs body(*loop_vars) while cond(*loop_vars) (one variable: not unpacked)."""
    if maximum_iterations is not None:
        raise _Error("keras.ops.while_loop: maximum_iterations is not supported; put the bound "
                    "into cond")
    return _k.while_loop(cond, body, loop_vars)

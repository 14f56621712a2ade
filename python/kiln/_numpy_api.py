"""kiln's numpy-style functions (kiln.sum, kiln.matmul, kiln.softmax, ...), generated at import
from the op table (ir/ops.def, read through kiln._kiln._op_table()).

One function per user-facing op of the table: ops marked internal (gradients, bookkeeping),
random (kiln.keras.random draws them) or side-effecting (all_reduce) are left out. Each takes
the op's tensor inputs, then its attributes, with the table's defaults (the C++ API's), under
numpy's names by one rule plus a small table of names:

- the function's name is the op's, except where numpy names the same computation otherwise
  (NUMPY_NAMES: select -> where, concat -> concatenate, neg -> negative, ...);
- inputs are named as numpy names them: ``x`` for one input and ``x1, x2`` for two (ufuncs),
  ``a`` for reductions and data movement, ``arrays`` for a variadic op; INPUT_NAMES has the rest;
- a reduction's ``axes`` attribute is numpy's ``axis``: None for all axes, an int or a tuple of
  ints (negative ones count from the end), ``()`` for none; ``axis`` of argmax / argmin is
  numpy's too (None: of the flattened array);
- ATTRIBUTE_NAMES renames the few other attributes numpy names differently (transpose's
  ``perm`` is ``axes``, reshape's ``shape`` is ``newshape``);
- an attribute with a default in the table gets it; one whose C++ default depends on the other
  arguments (transpose's perm, a pool's strides, attention's scale, slice's step) defaults to
  None, computed as the C++ API computes it (COMPUTED_DEFAULTS); the others are required;
- an ``ints`` attribute takes an int or any sequence of ints; a ``dtype`` one a name ("float32"),
  a numpy dtype or a numpy scalar type.

Inputs are tensors, Variables, numpy arrays or Python scalars (a scalar takes the dtype of the
first tensor input), as in kiln.ops. A bad argument (unknown keyword, missing argument, wrong
type) is a kiln.ArgumentError, a kiln.Error that is also a TypeError. The functions work
eagerly, under a GradientTape and inside kiln.function, since they call the same ops.
"""
import inspect
import math
import numbers

import numpy as np

from . import _kiln
from ._kiln import DTypeError, Error, Tensor, Variable


class ArgumentError(Error, TypeError):
    """A bad argument to a kiln function: an unknown keyword, a missing argument, a wrong type."""


# kiln op name -> numpy's name for the same computation.
NUMPY_NAMES = {
    "select": "where",
    "concat": "concatenate",
    "neg": "negative",
    "pow": "power",
    "sub": "subtract",
    "mul": "multiply",
    "div": "divide",
}

# Ops whose inputs the rule does not name (numpy's or, for ops numpy lacks, the C++ API's).
# A trailing "?" marks an optional input (None: left out).
INPUT_NAMES = {
    "select": ("condition", "x", "y"),
    "gather": ("a", "indices"),
    "scatter_add": ("updates", "indices"),
    "one_hot": ("indices",),
    "conv2d": ("input", "filter"),
    "attention": ("query", "key", "value", "mask?"),
}

# (op, attribute) -> numpy's name for it, besides the reduction rule (axes -> axis).
ATTRIBUTE_NAMES = {
    ("transpose", "perm"): "axes",
    ("reshape", "shape"): "newshape",
}

# Table ops kept out of the numpy-style API because numpy gives their name another meaning
# (numpy.pad takes pad_width and a mode): they stay in kiln.ops.
NOT_NUMPY = {"pad"}


def _reverse_axes(inputs, attrs):
    return list(range(inputs[0].ndim - 1, -1, -1))


def _pool_strides(inputs, attrs):
    return list(attrs["pool_size"])


def _attention_scale(inputs, attrs):
    d = inputs[0].shape[-1] if inputs[0].ndim else None
    if not d or d < 0:
        raise Error("attention: the default scale is 1 / sqrt(d) with d the last axis of query, "
                    f"but query has shape {tuple(inputs[0].shape)}; pass scale=")
    return 1.0 / math.sqrt(d)


def _ones_like_start(inputs, attrs):
    return [1] * len(attrs["start"])


# (op, attribute) -> how the C++ API computes its default from the other arguments (ops.h).
COMPUTED_DEFAULTS = {
    ("transpose", "perm"): _reverse_axes,
    ("max_pool2d", "strides"): _pool_strides,
    ("avg_pool2d", "strides"): _pool_strides,
    ("attention", "scale"): _attention_scale,
    ("slice", "step"): _ones_like_start,
}

_LEFT_OUT_TRAITS = {"internal", "random", "side-effecting"}


def _exported(row):
    return not (_LEFT_OUT_TRAITS & set(row["traits"])) and row["name"] not in NOT_NUMPY


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)  # numpy's ints too


def _ints(fname, pname, v):
    if _is_int(v):
        return [int(v)]
    try:
        items = list(v)
    except TypeError:
        items = None
    if items is None or isinstance(v, (str, bytes)) or not all(_is_int(i) for i in items):
        raise ArgumentError(f"kiln.{fname}: {pname} must be an int or a sequence of ints, "
                            f"got {v!r}")
    return [int(i) for i in items]


def _axis_list(fname, v):
    if v is None:
        return []
    if _is_int(v):
        return [int(v)]
    if isinstance(v, (tuple, list)) and all(_is_int(i) for i in v):
        return [int(i) for i in v]
    raise ArgumentError(f"kiln.{fname}: axis must be None, an int or a tuple of ints, got {v!r}")


class _Param:
    """How one argument of a generated function becomes an op input or attribute."""

    def __init__(self, name, role, attr=None, kind=None, default=inspect.Parameter.empty,
                 computed=None, optional=False):
        self.name, self.role, self.attr, self.kind = name, role, attr, kind
        self.default, self.computed, self.optional = default, computed, optional


def _array_to_tensor(v):
    """numpy arrays and scalars become tensors first, so that a Python scalar beside one takes
    its dtype (numpy's rule for an array and a Python number), as beside a kiln.Tensor."""
    return _kiln.tensor(v) if isinstance(v, (np.ndarray, np.generic)) else v


def _scalars_to_tensors(op, inputs):
    """Python numbers take the dtype of the first tensor among the op's value inputs (for
    where: x and y, not the condition), as numpy gives `where(c, x, 0.0)` x's dtype."""
    values = inputs[1:] if op == "select" else inputs
    like = next((x for x in values if isinstance(x, (Tensor, Variable))), None)
    if like is None:
        return inputs
    return [_kiln.tensor(x, dtype=like.dtype)
            if isinstance(x, (int, float, bool)) and (op != "select" or i > 0) else x
            for i, x in enumerate(inputs)]


def _describe_kind(kind):
    return {"int": "an int", "float": "a float", "bool": "a bool", "str": "a str",
            "ints": "an int or a sequence of ints",
            "dtype": "a dtype (\"float32\", numpy.int32, ...)"}[kind]


def _make(row):
    op = row["name"]
    name = NUMPY_NAMES.get(op, op)
    raw = getattr(_kiln.ops, op)
    traits = set(row["traits"])
    reduction = "reduction" in traits
    arity = row["arity"]
    params = []
    # ---- inputs
    if op in INPUT_NAMES:
        for n in INPUT_NAMES[op]:
            optional = n.endswith("?")
            params.append(_Param(n.rstrip("?"), "input", optional=optional,
                                 default=None if optional else inspect.Parameter.empty))
    elif arity < 0:
        params.append(_Param("arrays", "inputs"))
    elif arity == 1:
        elementwise = "elementwise" in traits
        params.append(_Param("x" if elementwise else "a", "input"))
    else:
        params += [_Param(f"x{i + 1}", "input") for i in range(arity)]
    # ---- attributes
    for a in row["attrs"]:
        attr, kind = a["name"], a["kind"]
        if reduction and attr == "axes":
            params.append(_Param("axis", "axes", attr, kind, default=None))
        elif reduction and attr == "axis" and kind == "int":
            params.append(_Param("axis", "flat_axis", attr, kind, default=None))
        else:
            pname = ATTRIBUTE_NAMES.get((op, attr), attr)
            computed = COMPUTED_DEFAULTS.get((op, attr))
            if computed is not None:
                default = None
            elif a["has_default"]:
                default = a["default"]
            else:
                default = inspect.Parameter.empty
            params.append(_Param(pname, "attr", attr, kind, default, computed))
    # Positional order as listed; a required attribute after a defaulted argument is keyword-only.
    sig_params, seen_default = [], False
    for p in params:
        has_default = p.default is not inspect.Parameter.empty
        keyword_only = seen_default and not has_default
        seen_default = seen_default or has_default
        sig_params.append(inspect.Parameter(
            p.name,
            inspect.Parameter.KEYWORD_ONLY if keyword_only else
            inspect.Parameter.POSITIONAL_OR_KEYWORD, default=p.default))
    sig = inspect.Signature(sorted(sig_params, key=lambda q: q.kind))
    by_name = {p.name: p for p in params}

    def call(*args, **kwargs):
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"kiln.{name}{sig}: {e}") from None
        bound.apply_defaults()
        values = bound.arguments
        inputs, attrs, later = [], {}, []
        identity = False
        for pname, v in values.items():
            p = by_name[pname]
            if p.role == "input":
                if v is None and p.optional:
                    continue
                if v is None:
                    raise ArgumentError(f"kiln.{name}: {pname} must be a tensor, got None")
                inputs.append(_array_to_tensor(v))
            elif p.role == "inputs":
                if isinstance(v, (Tensor, Variable, str)) or not hasattr(v, "__iter__") or \
                        getattr(v, "ndim", None) is not None:
                    raise ArgumentError(f"kiln.{name}: {pname} must be a sequence of tensors, "
                                        f"got {type(v).__name__}")
                inputs.extend(_array_to_tensor(x) for x in v)
            elif p.role == "axes":
                if isinstance(v, (tuple, list)) and len(v) == 0:
                    identity = True  # numpy: reducing over no axes changes nothing
                attrs[p.attr] = _axis_list(name, v)
            elif p.role == "flat_axis":
                if v is not None and not _is_int(v):
                    raise ArgumentError(f"kiln.{name}: axis must be None or an int, got {v!r}")
                attrs[p.attr] = v
            elif v is None and p.computed is not None:
                later.append(p)
            elif p.kind == "ints":
                attrs[p.attr] = _ints(name, pname, v)
            elif p.kind == "int" and _is_int(v):
                attrs[p.attr] = int(v)  # numpy's integer scalars as ints
            elif p.kind == "float" and isinstance(v, numbers.Real) and not isinstance(v, bool):
                attrs[p.attr] = float(v)
            else:
                attrs[p.attr] = v
        inputs = _scalars_to_tensors(op, inputs)
        for p in later:
            attrs[p.attr] = p.computed(_as_tensors(inputs), attrs)
        return _finish(row, name, raw, inputs, attrs, identity)

    call.__name__ = call.__qualname__ = name
    call.__module__ = "kiln"
    call.__signature__ = sig
    call.__doc__ = _doc(row, name, params, sig)
    call._kiln_op = op
    return name, call


# Ops whose `axis=None` means numpy's "of the flattened array".
_FLATTENING = {"argmax", "argmin", "concat", "gather"}

_DTYPE_CLASSES = {
    "float": ("float32", "float64"),
    "numeric": ("float32", "float64", "int32", "int64", "uint8"),
    "bool": ("bool",),
}


def _finish(row, name, raw, inputs, attrs, identity):
    """numpy's meaning where it goes beyond the op: flattened argmax, 1-D matmul, ..."""
    op = row["name"]
    if identity:  # a reduction over no axes: the input, after the op's dtype check
        x = _as_tensors(inputs)[0]
        allowed = _DTYPE_CLASSES.get(row["dtypes"])
        if allowed is not None and x.dtype not in allowed:
            raise DTypeError(f"kiln.{name}: input has dtype {x.dtype}, but {op} needs "
                             f"{row['dtypes_description']}")
        return x if isinstance(x, Tensor) else _kiln.ops.copy(x)
    if op in _FLATTENING and attrs.get("axis", 0) is None:  # numpy: over the flattened array
        keepdims = attrs.get("keepdims", False)
        if op == "concat":
            flat = [_kiln.ops.reshape(x, shape=[-1]) for x in _as_tensors(inputs)]
            return raw(*flat, axis=0)
        if op == "gather":
            a, indices = inputs
            return raw(_kiln.ops.reshape(a, shape=[-1]), indices, axis=0)
        x = _as_tensors(inputs)[0]
        out = raw(_kiln.ops.reshape(x, shape=[-1]), axis=0, keepdims=False)
        return _kiln.ops.reshape(out, shape=[1] * x.ndim) if keepdims else out
    if op == "concat" and len(inputs) == 0:
        raise ArgumentError("kiln.concatenate: needs at least one array, got none")
    if op == "div":
        for x in _as_tensors(inputs):
            if x.dtype not in ("float32", "float64"):
                raise DTypeError(
                    f"kiln.divide: numpy divides integers into floats, and kiln does not "
                    f"promote dtypes: got {x.dtype}; cast to float32 or float64 first "
                    f"(kiln.ops.div truncates integers toward zero)")
    if op == "matmul":  # numpy: a 1-D operand is a row (first) or a column (second) vector
        a, b = _as_tensors(inputs)
        if a.ndim == 1 or b.ndim == 1:
            if a.ndim == 0 or b.ndim == 0:
                raise Error("kiln.matmul: operands must not be scalars (numpy.matmul); use *")
            a2 = _kiln.ops.reshape(a, shape=[1, a.shape[0]]) if a.ndim == 1 else a
            b2 = _kiln.ops.reshape(b, shape=[b.shape[0], 1]) if b.ndim == 1 else b
            out = raw(a2, b2, **attrs)
            shape = list(out.shape)
            if b.ndim == 1:
                shape.pop(-1)
            if a.ndim == 1:
                shape.pop(-1 if b.ndim == 1 else -2)
            return _kiln.ops.reshape(out, shape=shape)
    return raw(*inputs, **attrs)


def _as_tensors(inputs):
    """The inputs as tensors or Variables, Python scalars taking the first tensor's dtype (as
    kiln.ops does)."""
    like = next((x for x in inputs if isinstance(x, (Tensor, Variable))), None)
    out = []
    for x in inputs:
        if isinstance(x, (Tensor, Variable)):  # a Variable has shape, ndim and dtype too
            out.append(x)
        elif like is not None and isinstance(x, (int, float, bool)):
            out.append(_kiln.tensor(x, dtype=like.dtype))
        else:
            out.append(_kiln.tensor(x))
    return out


def _doc(row, name, params, sig):
    op = row["name"]
    lines = [f"kiln.{name}{sig}", ""]
    raw = f"kiln.ops.{op}"
    arity = row["arity"]
    n = "one or more" if arity < 0 else str(arity)
    lines.append(f"numpy-style form of kiln's op \"{op}\" (ir/ops.def; the raw form is {raw}): "
                 f"{n} input(s) of {row['dtypes_description']}.")
    args = []
    for p in params:
        if p.role in ("input", "inputs"):
            continue
        if p.role == "axes":
            args.append("axis: None (every axis, the default), an int or a tuple of ints; "
                        "negative axes count from the end; () reduces nothing.")
        elif p.role == "flat_axis":
            args.append("axis: None (the default: of the flattened array) or an int.")
        elif p.computed is not None:
            args.append(f"{p.name}: {_describe_kind(p.kind)}; None (the default) computes it "
                        "as the C++ API does.")
        elif p.default is inspect.Parameter.empty:
            args.append(f"{p.name}: {_describe_kind(p.kind)} (required).")
        else:
            args.append(f"{p.name}: {_describe_kind(p.kind)}, default {p.default!r}.")
    if args:
        lines += ["", "Arguments:"] + ["  " + a for a in args]
    lines += ["", f"Traits: {', '.join(row['traits']) or 'none'}."]
    return "\n".join(lines)


def op_table():
    """The op table (ir/ops.def) as a list of dicts: name, arity (-1: one or more), traits,
    dtypes, dtypes_description, bf16 (what it does with bfloat16: "bytes", "via-f32",
    "convert" or "no"; ir/ops.def), attrs (each: name, kind, has_default, default)."""
    return _kiln._op_table()


def squeeze(a, axis=None):
    """kiln.squeeze(a, axis=None): removes size-1 axes (None: every one), as numpy.squeeze."""
    if axis is not None and not _is_int(axis) and not (
            isinstance(axis, (tuple, list)) and all(_is_int(i) for i in axis)):
        raise ArgumentError(f"kiln.squeeze: axis must be None, an int or a tuple of ints, "
                            f"got {axis!r}")
    return _kiln._squeeze(a, axis)


def expand_dims(a, axis):
    """kiln.expand_dims(a, axis): inserts a size-1 axis at `axis`, as numpy.expand_dims (an int;
    negative counts from the end of the result)."""
    if not _is_int(axis):
        raise ArgumentError(f"kiln.expand_dims: axis must be an int, got {axis!r}")
    return _kiln._expand_dims(a, int(axis))


def stack(arrays, axis=0):
    """kiln.stack(arrays, axis=0): joins same-shaped arrays along a new axis, as numpy.stack."""
    if not _is_int(axis):
        raise ArgumentError(f"kiln.stack: axis must be an int, got {axis!r}")
    return _kiln._stack(arrays, int(axis))


# Functions composed of table ops by the C++ API (frontend/ops.h), not rows of the table.
COMPOSED = {"squeeze": squeeze, "expand_dims": expand_dims, "stack": stack}


def generate():
    """{numpy name: function} for every exported op of the table, plus COMPOSED."""
    functions = {}
    for row in _kiln._op_table():
        if not _exported(row):
            continue
        name, fn = _make(row)
        assert name not in functions, f"two ops map to kiln.{name}"
        functions[name] = fn
    for name, fn in COMPOSED.items():
        assert name not in functions, name
        functions[name] = fn
    return functions

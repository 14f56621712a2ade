"""kiln from Python: tensors and numpy, numpy-style functions (kiln.sum, kiln.matmul, ...)
generated from the op table, the raw op table (kiln.ops), gradient tapes, and traced,
JIT-compiled functions (kiln.function, like tf.function).

    import numpy as np, kiln
    x = kiln.tensor(np.ones((2, 3), np.float32))
    with kiln.GradientTape() as tape:
        tape.watch(x)
        y = kiln.sum(kiln.tanh(x) * x)          # numpy-style: axis=None, keepdims=False
    print(tape.gradient(y, x).numpy())
    kiln.ops.sum(x, axes=[0], keepdims=True)   # the raw table: every attribute by keyword
"""
from . import _kiln
from ._kiln import (  # noqa: F401
    ConcreteFunction,
    DTypeError,
    Error,
    Function,
    GradientTape,
    KilnWarning,
    ModeComparison,
    Tensor,
    TensorSpec,
    Variable,
    __version__,
    compare_modes,
    cond,
    ops,
    scan,
    tensor,
    tensor_shares_memory,
    while_loop,
)

__all__ = [
    "ConcreteFunction", "DTypeError", "Error", "Function", "GradientTape", "KilnWarning",
    "ModeComparison", "Tensor", "TensorSpec", "compare_modes", "cond", "function", "ops", "scan",
    "tensor", "tensor_shares_memory", "while_loop", "__version__",
]
__all__ += ["Variable"]

# The bfloat16 dtype's name, accepted wherever a dtype is (as "float32" is). Tensor.numpy() of
# a bfloat16 tensor is an ml_dtypes.bfloat16 array where ml_dtypes is installed, else float32.
bfloat16 = "bfloat16"
__all__ += ["bfloat16"]

# The numpy-style API (kiln/_numpy_api.py): one function per user-facing op of the table.
from . import _numpy_api  # noqa: E402
from ._numpy_api import ArgumentError, op_table  # noqa: E402


def _export_numpy_api():
    functions = _numpy_api.generate()
    for name, fn in functions.items():
        if name in globals():
            raise ImportError(f"kiln.{name}: a numpy-style function would replace kiln.{name}")
        globals()[name] = fn
    return sorted(functions)


numpy_api = _export_numpy_api()  # the names of the numpy-style functions
__all__ += ["ArgumentError", "op_table", "numpy_api"] + numpy_api


def function(fn=None, *, input_signature=None, reduce_retracing=False, name=None, mode=None):
    """Traces `fn` into a kiln graph per signature and runs the graph on later calls.

    Usable as ``@kiln.function`` or ``@kiln.function(input_signature=[...], name="step")``;
    `mode` is "compiled" (the default) or "reference".
    """
    def wrap(f):
        return _kiln._function(f, input_signature=input_signature,
                               reduce_retracing=reduce_retracing, name=name, mode=mode)
    return wrap if fn is None else wrap(fn)


from . import keras  # noqa: E402  (kiln.keras: layers, models, fit; needs the names above)

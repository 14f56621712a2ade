"""kiln from Python: tensors and numpy, the op table's ops, gradient tapes, and traced,
JIT-compiled functions (kiln.function, like tf.function).

    import numpy as np, kiln
    x = kiln.tensor(np.ones((2, 3), np.float32))
    with kiln.GradientTape() as tape:
        tape.watch(x)
        y = kiln.ops.sum(x * x, axes=[0, 1], keepdims=False)
    print(tape.gradient(y, x).numpy())
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

"""kiln.keras.config: Keras 3's keras.config functions kiln has: the global dtype policy
(set_dtype_policy / dtype_policy, the same as kiln.keras.mixed_precision's
set_global_policy / global_policy) and floatx (always "float32")."""
from .mixed_precision import dtype_policy, set_dtype_policy

__all__ = ["set_dtype_policy", "dtype_policy", "floatx"]


def floatx():
    """Keras' default float dtype: kiln's is float32."""
    return "float32"

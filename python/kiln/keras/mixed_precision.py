"""kiln.keras.mixed_precision: Keras 3's dtype policies (keras.mixed_precision).

    keras.mixed_precision.set_global_policy("mixed_bfloat16")  # layers made from now on
    layer = keras.layers.Dense(10, dtype="float32")            # or per layer

"mixed_bfloat16" keeps variables in float32 and computes in bfloat16; "float32", "float64"
and "bfloat16" use one dtype for both. float16 policies are refused (kiln has no float16).
The global policy is read when a layer is constructed; None resets it to "float32".
bfloat16 computations run eagerly or compiled, each op rounded once either way."""
from .. import _kiln

DTypePolicy = _kiln.DTypePolicy
Policy = DTypePolicy  # Keras' older name

__all__ = ["DTypePolicy", "Policy", "set_global_policy", "global_policy", "set_dtype_policy",
           "dtype_policy"]


def set_global_policy(policy):
    """Sets the policy layers take when made without a dtype (a name, a DTypePolicy, or None
    for "float32")."""
    _kiln._set_global_policy(policy)


def global_policy():
    """The global DTypePolicy."""
    return _kiln._global_policy()


set_dtype_policy = set_global_policy  # Keras 3's names (also in keras.config)
dtype_policy = global_policy

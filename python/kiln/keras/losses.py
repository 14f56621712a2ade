"""kiln.keras.losses: kiln's losses (kiln::Loss) by Keras' class and function names. A loss
is called as loss(y_true, y_pred, sample_weight=None) and returns a scalar kiln.Tensor; compile
also takes a name ("mse") or a Python function (y_true, y_pred) -> per-sample losses, written
with kiln ops (it runs when the training step is traced)."""
from .. import _kiln

Loss = _kiln.Loss
__all__ = ["Loss", "MeanSquaredError", "MeanAbsoluteError", "BinaryCrossentropy",
           "CategoricalCrossentropy", "SparseCategoricalCrossentropy", "get"]


def MeanSquaredError():
    return _kiln._losses.mean_squared_error()


def MeanAbsoluteError():
    return _kiln._losses.mean_absolute_error()


def BinaryCrossentropy(from_logits=False):
    return _kiln._losses.binary_crossentropy(from_logits)


def CategoricalCrossentropy(from_logits=False):
    return _kiln._losses.categorical_crossentropy(from_logits)


def SparseCategoricalCrossentropy(from_logits=False, ignore_class=None):
    """ignore_class: positions labelled with it contribute zero loss and are left out of the
    mean (Keras)."""
    return _kiln._losses.sparse_categorical_crossentropy(
        from_logits, None if ignore_class is None else int(ignore_class))


def get(identifier):
    """A loss from its name (kiln.Error listing the known names for another)."""
    return identifier if isinstance(identifier, Loss) else Loss(identifier)


mean_squared_error = mse = MeanSquaredError()
mean_absolute_error = mae = MeanAbsoluteError()

"""kiln.keras.datasets: the data sets kiln ships. ``digits.load_data()`` is the UCI digits
(1,797 8x8 images, x float32 (N, 64) in [0, 1], y int64 labels) split as `kiln train` splits
it (20% test, seed 0)."""
import types

from .. import _kiln


def _load_digits(test_split=0.2, seed=0):
    """((x_train, y_train), (x_test, y_test)) as numpy arrays."""
    return _kiln._load_digits(test_split, seed)


digits = types.SimpleNamespace(load_data=_load_digits)
__all__ = ["digits"]

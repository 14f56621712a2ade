"""kiln.keras.random: Keras 3's random functions over kiln's random ops (ir/ops.def:
random_uniform, random_normal, random_int; counter-based Philox, the same numbers on any
machine and thread count).

    keras.random.normal((2, 3), seed=1)          # the same numbers at every call
    gen = keras.random.SeedGenerator(42)
    keras.random.uniform((4,), seed=gen)         # the next numbers of gen's stream

``seed`` is, as in Keras 3:

- an int: the numbers depend on it alone, so every call with it gives the same numbers, eagerly
  and inside a kiln.function (the seed is a constant of the traced graph);
- a SeedGenerator: each draw uses its state and advances it (a Variable, so a kiln.function
  captures it: traced calls draw what the same calls draw eagerly, and advance it as they do);
- None: the next seed of kiln's global sequence (``keras.utils.set_random_seed`` resets it);
  inside a kiln.function the draw then comes from the function's own random state, so every
  call draws new numbers.

Keras' functions kiln cannot compute faithfully (truncated_normal, shuffle, categorical, gamma,
beta, binomial) are absent."""
import numpy as _np

from .. import _kiln
from .._numpy_api import ArgumentError

__all__ = ["SeedGenerator", "normal", "uniform", "randint", "dropout"]


class SeedGenerator:
    """Keras 3's SeedGenerator: an int64 state variable (``.state``); ``next()`` returns the
    current state as the seed of a draw and adds one to it. A seed of None takes the next seed
    of kiln's global sequence."""

    def __init__(self, seed=None, name=None, **kwargs):
        if kwargs:
            raise ArgumentError(f"SeedGenerator: unexpected arguments {sorted(kwargs)}")
        self._seed = seed
        self.name = name
        self._generator = _kiln.SeedGenerator(seed, name)

    @property
    def state(self):
        return self._generator.state

    def next(self, ordered=True):
        return self._generator.next()

    def get_config(self):
        return {"seed": self._seed}

    @classmethod
    def from_config(cls, config):
        return cls(**config)


def _seed(seed, fn):
    if isinstance(seed, SeedGenerator):
        return seed.next()
    if isinstance(seed, _kiln.SeedGenerator):
        return seed.next()
    if seed is None:
        return _kiln.tensor(_np.int64(_kiln._next_global_seed()))
    if isinstance(seed, (int, _np.integer)) and not isinstance(seed, bool):
        return _kiln._fixed_seed(int(seed))
    if isinstance(seed, _kiln.Tensor) and seed.dtype == "int64" and seed.ndim == 0:
        return seed
    raise ArgumentError(f"keras.random.{fn}: seed must be an int, a SeedGenerator or None, "
                        f"got {seed!r}")


def _shape(shape, fn):
    if isinstance(shape, (int, _np.integer)) and not isinstance(shape, bool):
        return [int(shape)]
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        raise ArgumentError(f"keras.random.{fn}: shape must be a tuple of ints, got {shape!r}") \
            from None
    if any(d < 0 for d in dims):
        raise ArgumentError(f"keras.random.{fn}: shape {tuple(dims)} has a negative dimension")
    return dims


def _number(v, name, fn):
    if isinstance(v, bool) or not isinstance(v, (int, float, _np.integer, _np.floating)):
        raise ArgumentError(f"keras.random.{fn}: {name} must be a number, got {v!r}")
    return float(v)


def normal(shape, mean=0.0, stddev=1.0, dtype=None, seed=None):
    """Normal values of mean `mean` and standard deviation `stddev` (dtype None: float32)."""
    return _kiln.ops.random_normal(
        _seed(seed, "normal"), shape=_shape(shape, "normal"), dtype=dtype or "float32",
        mean=_number(mean, "mean", "normal"), stddev=_number(stddev, "stddev", "normal"))


def uniform(shape, minval=0.0, maxval=1.0, dtype=None, seed=None):
    """Uniform values in [minval, maxval) (dtype None: float32)."""
    return _kiln.ops.random_uniform(
        _seed(seed, "uniform"), shape=_shape(shape, "uniform"), dtype=dtype or "float32",
        minval=_number(minval, "minval", "uniform"), maxval=_number(maxval, "maxval", "uniform"))


def randint(shape, minval, maxval, dtype="int32", seed=None):
    """Integers uniformly in [minval, maxval)."""
    for name, v in (("minval", minval), ("maxval", maxval)):
        if isinstance(v, bool) or not isinstance(v, (int, _np.integer)):
            raise ArgumentError(f"keras.random.randint: {name} must be an int, got {v!r}")
    return _kiln.ops.random_int(_seed(seed, "randint"), shape=_shape(shape, "randint"),
                                dtype=dtype, minval=int(minval), maxval=int(maxval))


def dropout(inputs, rate, noise_shape=None, seed=None):
    """Inverted dropout: each element is zeroed with probability `rate` and the others scaled by
    1 / (1 - rate). `noise_shape` other than None is not supported (a kiln.Error)."""
    if noise_shape is not None:
        raise _kiln.Error("keras.random.dropout: noise_shape is not supported by kiln's dropout "
                          "(one draw per element); leave it None")
    return _kiln._dropout(inputs, _number(rate, "rate", "dropout"), _seed(seed, "dropout"))

"""kiln.keras.initializers: Keras 3's initializers over kiln's C++ ones
(kiln/keras/layers/initializers.h): the same formulas the built-in layers use.

    init = keras.initializers.GlorotUniform(seed=1)
    w = init((64, 32))                       # a kiln.Tensor, float32
    keras.layers.Dense(32, kernel_initializer=init)
    keras.initializers.get("he_normal")      # by name; get(config dict) and get(object) too

An initializer is called as ``init(shape, dtype=None)`` (None: float32). With a seed it gives
the same values at every call (Keras 3); without one each call draws the next seed of kiln's
global sequence (``keras.utils.set_random_seed`` resets it). ``get_config`` / ``from_config``
and ``serialize`` / ``deserialize`` use Keras' forms; a layer given one of these objects gets
Keras' serialized form ``{"class_name": ..., "config": ...}``, which its C++ factory reads
(every argument honoured or refused) and its config writes back."""
from .. import _kiln

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "GlorotUniform", "GlorotNormal", "HeUniform", "HeNormal",
           "Orthogonal", "zeros", "ones", "constant", "random_normal", "random_uniform",
           "truncated_normal", "glorot_uniform", "glorot_normal", "he_uniform", "he_normal",
           "orthogonal", "get", "serialize", "deserialize"]


class Initializer:
    """The base: ``__call__(shape, dtype=None)``, ``get_config()``, ``from_config(config)``."""

    def __call__(self, shape, dtype=None):
        config = self.get_config()
        seed = config.pop("seed", None)
        return _kiln._initialize(type(self).__name__, {k: float(v) for k, v in config.items()},
                                 seed, _shape(shape), dtype)

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def clone(self):
        return self.__class__.from_config(self.get_config())

    def _kiln_config(self):
        return serialize(self)

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __hash__(self):
        return hash((type(self).__name__, tuple(sorted(self.get_config().items()))))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


def _shape(shape):
    if isinstance(shape, int):
        return (shape,)
    return tuple(int(d) for d in shape)


def _seed_arg(cls, seed):
    if seed is not None and (not isinstance(seed, int) or isinstance(seed, bool)):
        raise _kiln.Error(f"{cls}: seed must be an int or None, got {seed!r}")
    return seed


class Zeros(Initializer):
    """All zeros."""


class Ones(Initializer):
    """All ones."""


class Constant(Initializer):
    """All `value` (a number)."""

    def __init__(self, value=0.0):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            if hasattr(value, "ndim") and value.ndim == 0:
                value = value.item()
            else:
                raise _kiln.Error(f"Constant: value must be a number, got {value!r} (kiln's "
                                  "Constant initializer fills with one scalar)")
        self.value = value

    def get_config(self):
        return {"value": self.value}


class RandomNormal(Initializer):
    """Normal values of mean `mean` and standard deviation `stddev`."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, _seed_arg("RandomNormal", seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class RandomUniform(Initializer):
    """Uniform values in [minval, maxval)."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval, self.seed = minval, maxval, _seed_arg("RandomUniform", seed)

    def get_config(self):
        return {"minval": self.minval, "maxval": self.maxval, "seed": self.seed}


class TruncatedNormal(Initializer):
    """Normal values redrawn until within two standard deviations of the mean."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, _seed_arg("TruncatedNormal", seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed}


class _Seeded(Initializer):
    def __init__(self, seed=None):
        self.seed = _seed_arg(type(self).__name__, seed)

    def get_config(self):
        return {"seed": self.seed}


class GlorotUniform(_Seeded):
    """Uniform in [-limit, limit], limit = sqrt(6 / (fan_in + fan_out))."""


class GlorotNormal(_Seeded):
    """Truncated normal of variance 2 / (fan_in + fan_out)."""


class HeUniform(_Seeded):
    """Uniform in [-limit, limit], limit = sqrt(6 / fan_in)."""


class HeNormal(_Seeded):
    """Truncated normal of variance 2 / fan_in."""


class Orthogonal(Initializer):
    """An orthogonal matrix (rows or columns orthonormal) times `gain`."""

    def __init__(self, gain=1.0, seed=None):
        self.gain, self.seed = gain, _seed_arg("Orthogonal", seed)

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed}


# Keras' snake_case names of the classes.
zeros, ones, constant = Zeros, Ones, Constant
random_normal, random_uniform, truncated_normal = RandomNormal, RandomUniform, TruncatedNormal
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
he_uniform, he_normal, orthogonal = HeUniform, HeNormal, Orthogonal

_BY_NAME = {c.__name__: c for c in (Zeros, Ones, Constant, RandomNormal, RandomUniform,
                                     TruncatedNormal, GlorotUniform, GlorotNormal, HeUniform,
                                     HeNormal, Orthogonal)}
_ALIASES = {"zeros": Zeros, "ones": Ones, "constant": Constant, "random_normal": RandomNormal,
            "normal": RandomNormal, "random_uniform": RandomUniform, "uniform": RandomUniform,
            "truncated_normal": TruncatedNormal, "glorot_uniform": GlorotUniform,
            "glorot_normal": GlorotNormal, "he_uniform": HeUniform, "he_normal": HeNormal,
            "orthogonal": Orthogonal}


def serialize(initializer):
    """Keras' serialized form: {"module", "class_name", "config", "registered_name"}."""
    return {"module": "keras.initializers", "class_name": type(initializer).__name__,
            "config": initializer.get_config(), "registered_name": None}


def deserialize(config, custom_objects=None):
    """The initializer of a serialized form (or of a name)."""
    if isinstance(config, str):
        return get(config)
    name = config.get("class_name")
    cls = (custom_objects or {}).get(name) or _BY_NAME.get(name) or _ALIASES.get(name)
    if cls is None:
        raise _kiln.Error(f"unknown initializer class {name!r}: expected one of "
                          f"{', '.join(sorted(_BY_NAME))}")
    return cls.from_config(dict(config.get("config") or {}))


def get(identifier):
    """An initializer from a name ("glorot_uniform", "GlorotUniform"), a serialized dict, an
    Initializer (returned as is) or None (None)."""
    if identifier is None or isinstance(identifier, Initializer):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _ALIASES.get(identifier) or _BY_NAME.get(identifier)
        if cls is None:
            raise _kiln.Error(f"unknown initializer {identifier!r}: expected one of "
                              f"{', '.join(sorted(_ALIASES))} (or a class name)")
        return cls()
    if callable(identifier):
        return identifier
    raise _kiln.Error(f"cannot interpret {identifier!r} as an initializer")

"""kiln.keras.constraints: Keras 3's weight constraints for kiln's built-in layers.

A constraint is given to a layer's ``*_constraint`` argument by name (``"non_neg"``,
``"max_norm"``, ``"unit_norm"``, ``"min_max_norm"``) or as one of these objects
(``Dense(4, kernel_constraint=MaxNorm(3.0))``). The layer hands it to the C++ layer as Keras'
serialized form; the optimizer projects the weight after each update (keras/layers/
constraints.h), eagerly and inside compiled training steps."""

__all__ = ["Constraint", "MaxNorm", "MinMaxNorm", "NonNeg", "UnitNorm", "max_norm",
           "min_max_norm", "non_neg", "unit_norm", "get", "serialize", "deserialize"]


class Constraint:
    """The base: get_config() holds the arguments; serialize() gives Keras' form."""

    def get_config(self):
        return {}

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def _kiln_config(self):
        return serialize(self)

    def __eq__(self, other):
        return type(self) is type(other) and self.get_config() == other.get_config()

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class NonNeg(Constraint):
    """w * (w >= 0)."""


class MaxNorm(Constraint):
    """w * clip(norms, 0, max_value) / (1e-7 + norms), norms over `axis`."""

    def __init__(self, max_value=2, axis=0):
        self.max_value = max_value
        self.axis = axis

    def get_config(self):
        return {"max_value": self.max_value, "axis": self.axis}


class UnitNorm(Constraint):
    """w / (1e-7 + norms), norms over `axis`."""

    def __init__(self, axis=0):
        self.axis = axis

    def get_config(self):
        return {"axis": self.axis}


class MinMaxNorm(Constraint):
    """w * (rate * clip(norms, min_value, max_value) + (1 - rate) * norms) / (1e-7 + norms)."""

    def __init__(self, min_value=0.0, max_value=1.0, rate=1.0, axis=0):
        self.min_value = min_value
        self.max_value = max_value
        self.rate = rate
        self.axis = axis

    def get_config(self):
        return {"min_value": self.min_value, "max_value": self.max_value, "rate": self.rate,
                "axis": self.axis}


non_neg, max_norm, unit_norm, min_max_norm = NonNeg, MaxNorm, UnitNorm, MinMaxNorm
_CLASSES = {"NonNeg": NonNeg, "MaxNorm": MaxNorm, "UnitNorm": UnitNorm, "MinMaxNorm": MinMaxNorm,
            "non_neg": NonNeg, "max_norm": MaxNorm, "unit_norm": UnitNorm,
            "min_max_norm": MinMaxNorm}


def serialize(constraint):
    """Keras' serialized form (what kiln's get_config writes)."""
    if constraint is None:
        return None
    config = dict(constraint.get_config())
    if isinstance(config.get("axis"), tuple):
        config["axis"] = list(config["axis"])
    return {"module": "keras.constraints", "class_name": type(constraint).__name__,
            "config": config, "registered_name": None}


def deserialize(config):
    """The constraint a serialized form (or a name) describes."""
    if config is None:
        return None
    if isinstance(config, str):
        return get(config)
    cls = _CLASSES.get(config["class_name"])
    if cls is None:
        raise ValueError(f"unknown constraint {config['class_name']!r}; kiln has "
                         f"NonNeg, MaxNorm, UnitNorm and MinMaxNorm")
    return cls.from_config(config.get("config") or {})


def get(identifier):
    """None, a name, a serialized form or a Constraint -> a Constraint (or None)."""
    if identifier is None or isinstance(identifier, Constraint):
        return identifier
    if isinstance(identifier, str):
        cls = _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(f"unknown constraint {identifier!r}; kiln has 'non_neg', "
                             f"'max_norm', 'unit_norm' and 'min_max_norm'")
        return cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    raise TypeError(f"a constraint should be a name or a kiln.keras.constraints.Constraint, got "
                    f"{type(identifier).__name__}")

"""kiln.keras.layers: the Layer base for layers written in Python, and one class per layer of
kiln's C++ registry (frontend/saving/builtin_layers.cc), generated at import: ``Dense(64,
activation="relu")`` makes the layer from its Keras config (kiln::layer_from_config), so the
arguments, their defaults and their checks are the C++ layer's. The first arguments may be
given by position in Keras' order (``_POSITIONAL``); the others by keyword. No keyword is
dropped: one the C++ layer does not read must be null or the value kiln computes anyway
(kiln::layer_from_config refuses anything else with kiln.Error), and one the layer does not
have at all is a TypeError. Constraints are names or kiln.keras.constraints objects."""
from .. import _kiln
from . import _base

__all__ = ["Layer", "Input", "InputSpec"]


class Layer(_base.LayerMixin, _kiln._Layer, metaclass=_base.KerasMeta):
    __doc__ = _base.LayerMixin.__doc__
    __slots__ = ()  # the layout of C++-made layers, so wrap() can give them a Python class
    _kiln_instance_of = _kiln._Layer


_base.register_class(Layer)

# Keras' leading positional arguments; everything else is by keyword.
_POSITIONAL = {
    "Activation": ("activation",),
    "AveragePooling1D": ("pool_size",),
    "AveragePooling2D": ("pool_size",),
    "Bidirectional": ("layer",),
    "Concatenate": ("axis",),
    "Conv1D": ("filters", "kernel_size"),
    "Conv2D": ("filters", "kernel_size"),
    "Dense": ("units",),
    "Dropout": ("rate",),
    "Embedding": ("input_dim", "output_dim"),
    "GRU": ("units",),
    "LSTM": ("units",),
    "Masking": ("mask_value",),
    "MaxPooling1D": ("pool_size",),
    "MaxPooling2D": ("pool_size",),
    "MultiHeadAttention": ("num_heads", "key_dim"),
    "PositionEmbedding": ("sequence_length",),
    "Reshape": ("target_shape",),
    "SimpleRNN": ("units",),
    "TimeDistributed": ("layer",),
}
_ALWAYS_ACCEPTED = {"name", "trainable", "dtype"}


def _config_value(v):
    if hasattr(v, "_kiln_config"):  # a kiln.keras.constraints.Constraint
        return v._kiln_config()
    if isinstance(v, _kiln._Layer):
        return _kiln._serialize_layer(v)
    if isinstance(v, tuple):
        return [_config_value(e) for e in v]
    if isinstance(v, list):
        return [_config_value(e) for e in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):  # numpy scalars
        return v.item()
    return v


def _make_builtin(class_name):
    positional = _POSITIONAL.get(class_name, ())

    def __new__(cls, *args, **kwargs):
        if "_kiln_builtin" not in cls.__dict__:
            raise TypeError(
                f"{cls.__name__}: kiln's built-in {class_name} is a C++ layer and cannot be "
                f"subclassed in Python; subclass kiln.keras.layers.Layer and use a "
                f"{class_name} as a sublayer (an attribute) instead")
        if len(args) > len(positional):
            raise TypeError(f"{class_name}() takes {len(positional)} positional argument(s) "
                            f"({', '.join(positional) or 'none'}); pass the others by keyword")
        config = dict(zip(positional, args))
        for k in kwargs:
            if k in config:
                raise TypeError(f"{class_name}() got multiple values for argument {k!r}")
        input_shape = kwargs.pop("input_shape", None)
        if "input_dim" in kwargs and "input_dim" not in positional:  # Embedding's is its own
            input_shape = (kwargs.pop("input_dim"),)
        config.update(kwargs)
        for k, v in config.items():
            if callable(v) and not isinstance(v, (_kiln._Layer, type)):
                raise TypeError(
                    f"{class_name}(): argument {k!r} is a Python callable; kiln's built-in "
                    f"layers take activations, initializers and regularizers by name (e.g. "
                    f"activation=\"relu\", kernel_initializer=\"glorot_uniform\"); for your own "
                    f"function write a Python layer (subclass kiln.keras.layers.Layer)")
        try:
            layer = _kiln._layer_from_config(
                class_name, {k: _config_value(v) for k, v in config.items()})
        except _kiln.Error as e:
            # An argument the layer does not have (kiln::layer_from_config refuses it rather
            # than drop it): Python's usual TypeError for an unexpected keyword.
            if "is not an argument kiln's" in str(e):
                raise TypeError(f"{class_name}() got an unexpected keyword argument: {e}") from e
            raise
        known = set(layer._base_get_config()) | _ALWAYS_ACCEPTED
        unknown = sorted(set(config) - known)
        if unknown:
            raise TypeError(f"{class_name}() got unexpected keyword argument(s) {unknown}; it "
                            f"takes {sorted(known - _ALWAYS_ACCEPTED)}")
        layer.__class__ = cls
        if input_shape is not None:
            layer._input_shape = tuple(input_shape)
        return layer

    def __init__(self, *args, **kwargs):
        pass  # made in __new__

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    def build(self, input_shape):
        """Creates the weights for inputs of this shape (a tuple, None for unknown sizes; a
        list of them for several inputs), once, as the first call would."""
        _kiln._build_layer(self, input_shape)

    doc = (f"kiln's {class_name} layer (made by the C++ registry from its Keras config); "
           f"positional arguments: {', '.join(positional) or 'none'}.")
    return type(class_name, (Layer,), {
        "__slots__": (), "_kiln_builtin": True, "__new__": __new__, "__init__": __init__,
        "from_config": from_config, "build": build, "__doc__": doc, "__module__": __name__})


for _name in _kiln._builtin_layer_classes():
    if _name in ("Sequential", "Functional"):
        continue  # kiln.keras.Sequential / kiln.keras.Model
    globals()[_name] = _base.register_class(_make_builtin(_name))
    __all__.append(_name)
del _name


def Input(shape, dtype=None, name=None):
    """A symbolic tensor of shape (None, *shape) for functional models (kiln::Input)."""
    return _kiln.Input(tuple(shape) if not isinstance(shape, int) else (shape,), dtype,
                       name or "")


class InputSpec:
    """Accepted for Keras compatibility; kiln's layers check their inputs themselves."""

    def __init__(self, **kwargs):
        self.__dict__.update(kwargs)


def serialize(layer):
    """{"class_name", "config"} of a layer (kiln::serialize_layer)."""
    return _kiln._serialize_layer(layer)


def deserialize(config, custom_objects=None):
    """The layer a {"class_name", "config"} dict describes: a class of `custom_objects`
    ({"Name": cls}, made by cls.from_config) or of kiln's registry; kiln.Error naming the known
    classes for another name."""
    class_name = config["class_name"]
    if custom_objects and class_name in custom_objects:
        return custom_objects[class_name].from_config(config["config"])
    return _base.wrap(_kiln._layer_from_config(class_name, dict(config["config"])))


__all__ += ["serialize", "deserialize"]

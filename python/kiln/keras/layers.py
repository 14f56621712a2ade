"""kiln.keras.layers: the Layer base for layers written in Python, and one class per layer of
kiln's C++ registry (keras/saving/builtin_layers.cc), generated at import: ``Dense(64,
activation="relu")`` makes the layer from its Keras config (kiln::layer_from_config), so the
arguments, their defaults and their checks are the C++ layer's. The first arguments may be
given by position in Keras' order (``_POSITIONAL``); the others by keyword. No keyword is
dropped: one the C++ layer does not read must be null or the value kiln computes anyway
(kiln::layer_from_config refuses anything else with kiln.Error), and one the layer does not
have at all is a TypeError. Constraints are names or kiln.keras.constraints objects."""
import warnings

from .. import _kiln
from . import _base

__all__ = ["Layer", "Input", "InputSpec"]


class Layer(_base.LayerMixin, _kiln._Layer, metaclass=_base.KerasMeta):
    __doc__ = _base.LayerMixin.__doc__
    __slots__ = ()  # the layout of C++-made layers, so wrap() can give them a Python class
    _kiln_instance_of = _kiln._Layer


_base.register_class(Layer)

# Keras 3's constructor arguments in their order: any prefix may be given by position, as in
# Keras (``Dense(64, "relu")``, ``Conv2D(32, 3, 1, "same")``); everything else by keyword.
_POOLING = ("pool_size", "strides", "padding", "data_format")
_CONV = ("filters", "kernel_size", "strides", "padding", "data_format", "dilation_rate", "groups",
         "activation", "use_bias", "kernel_initializer", "bias_initializer",
         "kernel_regularizer", "bias_regularizer", "activity_regularizer", "kernel_constraint",
         "bias_constraint")
_RNN_WEIGHTS = ("kernel_initializer", "recurrent_initializer", "bias_initializer")
_RNN_REGULARIZERS = ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                     "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                     "bias_constraint", "dropout", "recurrent_dropout")
_RNN_FLAGS = ("return_sequences", "return_state", "go_backwards", "stateful", "unroll")
_GLOBAL_POOLING = ("data_format", "keepdims")
_CELL_WEIGHTS = ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                 "kernel_constraint", "recurrent_constraint", "bias_constraint", "dropout",
                 "recurrent_dropout")
_POSITIONAL = {
    "Activation": ("activation",),
    "AveragePooling1D": _POOLING,
    "AveragePooling2D": _POOLING,
    "BatchNormalization": ("axis", "momentum", "epsilon", "center", "scale", "beta_initializer",
                           "gamma_initializer", "moving_mean_initializer",
                           "moving_variance_initializer", "beta_regularizer",
                           "gamma_regularizer", "beta_constraint", "gamma_constraint",
                           "synchronized"),
    "Bidirectional": ("layer", "merge_mode", "weights", "backward_layer"),
    "Concatenate": ("axis",),
    "Conv1D": _CONV,
    "Conv2D": _CONV,
    "Dense": ("units", "activation", "use_bias", "kernel_initializer", "bias_initializer",
              "kernel_regularizer", "bias_regularizer", "activity_regularizer",
              "kernel_constraint", "bias_constraint"),
    "Dropout": ("rate", "noise_shape", "seed"),
    "Embedding": ("input_dim", "output_dim", "embeddings_initializer", "embeddings_regularizer",
                  "embeddings_constraint", "mask_zero", "weights"),
    "Flatten": ("data_format",),
    "GlobalAveragePooling1D": _GLOBAL_POOLING,
    "GlobalAveragePooling2D": _GLOBAL_POOLING,
    "GlobalMaxPooling1D": _GLOBAL_POOLING,
    "GlobalMaxPooling2D": _GLOBAL_POOLING,
    "GRU": ("units", "activation", "recurrent_activation", "use_bias") + _RNN_WEIGHTS
    + _RNN_REGULARIZERS + ("seed",) + _RNN_FLAGS + ("reset_after", "use_cudnn"),
    "InputLayer": ("shape", "batch_size", "dtype", "sparse", "batch_shape", "input_tensor",
                   "optional"),
    "LayerNormalization": ("axis", "epsilon", "center", "scale", "rms_scaling",
                           "beta_initializer", "gamma_initializer", "beta_regularizer",
                           "gamma_regularizer", "beta_constraint", "gamma_constraint"),
    "LSTM": ("units", "activation", "recurrent_activation", "use_bias") + _RNN_WEIGHTS
    + ("unit_forget_bias",) + _RNN_REGULARIZERS + ("seed",) + _RNN_FLAGS + ("use_cudnn",),
    "LSTMCell": ("units", "activation", "recurrent_activation", "use_bias") + _RNN_WEIGHTS
    + ("unit_forget_bias",) + _CELL_WEIGHTS + ("seed",),
    "GRUCell": ("units", "activation", "recurrent_activation", "use_bias") + _RNN_WEIGHTS
    + _CELL_WEIGHTS + ("reset_after", "seed"),
    "SimpleRNNCell": ("units", "activation", "use_bias") + _RNN_WEIGHTS + _CELL_WEIGHTS
    + ("seed",),
    "RNN": ("cell",) + _RNN_FLAGS + ("zero_output_for_mask",),
    "Masking": ("mask_value",),
    "MaxPooling1D": _POOLING,
    "MaxPooling2D": _POOLING,
    "MultiHeadAttention": ("num_heads", "key_dim", "value_dim", "dropout", "use_bias",
                           "output_shape", "attention_axes", "kernel_initializer",
                           "bias_initializer", "kernel_regularizer", "bias_regularizer",
                           "activity_regularizer", "kernel_constraint", "bias_constraint",
                           "seed"),
    "PositionEmbedding": ("sequence_length", "initializer"),
    "Reshape": ("target_shape",),
    "SimpleRNN": ("units", "activation", "use_bias") + _RNN_WEIGHTS + _RNN_REGULARIZERS
    + _RNN_FLAGS + ("seed",),
    "TimeDistributed": ("layer",),
}
# Keras 3 constructor arguments that kiln's layers do not have, at the value that leaves Keras'
# result unchanged (what kiln computes): accepted at that value only, anything else refused
# with kiln.Error naming the layer, the argument and the value.
_KERAS_DEFAULT_ONLY = {
    "Dense": {"lora_rank": None, "lora_alpha": None, "quantization_config": None},
    "Embedding": {"lora_rank": None, "lora_alpha": None, "quantization_config": None},
    "Bidirectional": {"weights": None},
    "LSTM": {"use_cudnn": "auto"},
    "GRU": {"use_cudnn": "auto"},
    "InputLayer": {"sparse": None, "input_tensor": None, "optional": False, "ragged": None},
}
_ALWAYS_ACCEPTED = {"name", "trainable", "dtype"}


def _config_value(v):
    if hasattr(v, "_kiln_config"):  # a keras.constraints / keras.initializers object
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


def _input_layer_shape(config, kwargs):
    """InputLayer(shape=(20,), batch_size=None): Keras 3's spelling of batch_shape."""
    shape = config.pop("shape", kwargs.pop("shape", None))
    batch_size = config.pop("batch_size", kwargs.pop("batch_size", None))
    if shape is not None:
        if "batch_shape" in config or "batch_shape" in kwargs:
            raise TypeError("InputLayer(): give shape= or batch_shape=, not both")
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        config["batch_shape"] = (batch_size,) + shape
    elif batch_size is not None:
        raise TypeError("InputLayer(): batch_size= needs shape=")


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
        for k, default in _KERAS_DEFAULT_ONLY.get(class_name, {}).items():
            v = config.pop(k, kwargs.pop(k, default))
            if not (v is default or (isinstance(v, (str, bool, int, float)) and v == default)
                    or (default is None and v is False)):
                raise _kiln.Error(
                    f"{class_name}(): argument {k}={v!r} is not supported by kiln's "
                    f"{class_name} (it computes {k}={default!r} only); remove the argument")
        if class_name == "Embedding" and "input_length" in kwargs:
            warnings.warn("Embedding: argument input_length is deprecated in Keras 3 and has "
                          "no effect; remove it", stacklevel=2)
            kwargs.pop("input_length")
        if class_name == "InputLayer":
            _input_layer_shape(config, kwargs)
        initial_weights = None
        if class_name == "Embedding":  # Keras 3: the initial embeddings matrix
            initial_weights = config.pop("weights", kwargs.pop("weights", None))
        input_shape = kwargs.pop("input_shape", None)
        if "input_dim" in kwargs and "input_dim" not in positional:  # Embedding's is its own
            input_shape = (kwargs.pop("input_dim"),)
        config.update(kwargs)
        for k, v in config.items():
            if callable(v) and not isinstance(v, (_kiln._Layer, type)) and not hasattr(
                    v, "_kiln_config"):  # keras.initializers objects are callable
                raise TypeError(
                    f"{class_name}(): argument {k!r} is a Python callable; kiln's built-in "
                    f"layers take activations and regularizers by name and initializers by name "
                    f"or as keras.initializers objects (e.g. activation=\"relu\", "
                    f"kernel_initializer=\"glorot_uniform\"); for your own function write a "
                    f"Python layer (subclass kiln.keras.layers.Layer)")
        cell = config.pop("cell", None) if class_name == "RNN" else None
        if isinstance(cell, (list, tuple)):
            raise _kiln.Error(
                "RNN(): argument cell is a list of cells (Keras' StackedRNNCells); kiln's RNN "
                "runs one cell: stack RNN layers with return_sequences=True instead")
        try:
            if isinstance(cell, _kiln._Layer):  # Keras keeps the cell object: rnn.cell is cell
                layer = _kiln._rnn_with_cell(
                    cell, {k: _config_value(v) for k, v in config.items()})
            else:
                if cell is not None:
                    config["cell"] = cell
                layer = _kiln._layer_from_config(
                    class_name, {k: _config_value(v) for k, v in config.items()})
        except _kiln.Error as e:
            # An argument the layer does not have (kiln::layer_from_config refuses it rather
            # than drop it): Python's usual TypeError for an unexpected keyword.
            if "is not an argument kiln's" in str(e):
                raise TypeError(f"{class_name}() got an unexpected keyword argument: {e}") from e
            raise
        known = set(layer._base_get_config()) | _ALWAYS_ACCEPTED
        if cell is not None:
            config["cell"] = cell
        unknown = sorted(set(config) - known)
        if unknown:
            raise TypeError(f"{class_name}() got unexpected keyword argument(s) {unknown}; it "
                            f"takes {sorted(known - _ALWAYS_ACCEPTED)}")
        layer.__class__ = cls
        if initial_weights is not None:
            if not isinstance(initial_weights, (list, tuple)):
                initial_weights = [initial_weights]
            _kiln._build_layer(layer, (None,))
            layer.set_weights(list(initial_weights))
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


def _cell_state_size(self):
    """Keras: [units, units] for an LSTMCell, units for the others."""
    units = self._base_get_config()["units"]
    return [units, units] if self.class_name == "LSTMCell" else units


def _cell_output_size(self):
    return self._base_get_config()["units"]


def _rnn_cell(self):
    """The cell this RNN runs (the object it was given)."""
    return _base.wrap(_kiln._rnn_cell(self))


for _name in ("LSTMCell", "GRUCell", "SimpleRNNCell"):
    globals()[_name].state_size = property(_cell_state_size)
    globals()[_name].output_size = property(_cell_output_size)
RNN.cell = property(_rnn_cell)  # noqa: F821  (generated above)
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

"""What kiln.keras.layers.Layer and kiln.keras.Model share on the Python side: the life cycle
of a layer subclassed in Python (``build`` / ``call`` / ``add_weight`` / ``get_config``), and
the class every layer or model object coming back from C++ gets (``wrap``).

The C++ objects are kiln::LayerImpl and kiln::ModelImpl (``kiln._kiln._Layer`` / ``_Model``);
a Python subclass runs through the PyLayer trampoline (python/src/keras_bindings.h), which calls
``build``, ``_kiln_call`` and ``get_config`` below."""
import os
import sys

from .. import _kiln
from . import _calls

# class name -> Python class, for objects made in C++ (load_model, model.layers)
_CLASSES = {}

# The kiln package's directory: frames inside it are never the user's code.
_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_frame():
    """(file, line) of the innermost caller outside the kiln package, or None."""
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_KILN_DIR):
        f = f.f_back
    return None if f is None else (f.f_code.co_filename, f.f_lineno)


def note_origin(obj):
    """Notes where the user's code put a layer into a model or made an optimizer: a traced
    step's nodes show it as their source location (kiln::LayerImpl::note_origin)."""
    if isinstance(obj, _kiln._Layer) and obj._origin_known:
        return
    frame = user_frame()
    if frame is not None:
        obj._note_origin(*frame)


class KerasMeta(type(_kiln._Layer)):
    """isinstance(x, Layer) / isinstance(x, Model) for every kiln layer or model, including
    built-in ones made in C++ (the classes name their C++ base in ``_kiln_instance_of``)."""

    def __instancecheck__(cls, obj):
        base = cls.__dict__.get("_kiln_instance_of")
        if base is not None:
            return isinstance(obj, base)
        return super().__instancecheck__(obj)

    def __subclasscheck__(cls, sub):
        base = cls.__dict__.get("_kiln_instance_of")
        if base is not None and isinstance(sub, type):
            return issubclass(sub, base)
        return super().__subclasscheck__(sub)


def register_class(cls, class_name=None):
    _CLASSES[class_name or cls.__name__] = cls
    return cls


def wrap(obj):
    """Gives a layer or model made in C++ the Python class of its Keras class name."""
    if obj is None or not isinstance(obj, _kiln._Layer):
        return obj
    if type(obj) in (_kiln._Layer, _kiln._Model, _kiln._Sequential, _kiln._Functional):
        cls = _CLASSES.get(obj.class_name)
        if cls is None:
            cls = _CLASSES["Model" if isinstance(obj, _kiln._Model) else "Layer"]
        try:
            obj.__class__ = cls
        except TypeError:
            pass
    return obj


class LayerMixin:
    """Keras' Layer API in Python over kiln::LayerImpl. Subclass kiln.keras.layers.Layer:

        class Scale(kiln.keras.layers.Layer):
            def __init__(self, factor=1.0, **kwargs):
                super().__init__(**kwargs)
                self.factor = factor
            def build(self, input_shape):
                self.w = self.add_weight(shape=(input_shape[-1],), initializer="ones", name="w")
            def call(self, inputs):
                return inputs * self.w * self.factor
            def get_config(self):
                return {**super().get_config(), "factor": self.factor}

    ``build`` runs once, on the first call, with the input shape (a tuple, None for the batch
    dimension); ``call`` runs eagerly on concrete tensors, on symbolic ones in functional models
    and once per traced step in fit (later steps run the compiled graph without Python).
    """

    __slots__ = ()

    def __init__(self, name=None, trainable=True, dtype=None, **kwargs):
        kwargs.pop("input_shape", None)
        kwargs.pop("input_dim", None)
        if kwargs:
            raise TypeError(f"{type(self).__name__}: unexpected keyword arguments "
                            f"{sorted(kwargs)}")
        super().__init__(type(self).__name__, name or "")
        self._kiln_attach(self)
        if dtype is not None:  # a policy name, DTypePolicy or dtype (else the global policy)
            self.dtype_policy = dtype
        self.supports_masking = self.__dict__.pop(
            "_kiln_supports_masking", type(self)._kiln_custom_compute_mask)
        if not trainable:
            self.trainable = False

    # -- what subclasses override
    def build(self, input_shape):
        """Creates the weights from the input shape (default: none)."""

    def call(self, inputs, *args, **kwargs):
        raise NotImplementedError(
            f"layer {self.name!r} ({type(self).__name__}) does not override call(inputs)")

    def get_config(self):
        """Keras' config: {"name", "trainable", ...}; subclasses add their arguments."""
        return self._base_get_config()

    @classmethod
    def from_config(cls, config):
        return cls(**config)

    # -- helpers
    def add_weight(self, shape=None, initializer=None, dtype=None, trainable=True,
                   regularizer=None, name=None):
        """Creates a variable "<layer>/<name>" tracked by the layer (Keras 3's argument order).
        `initializer`: a name ("glorot_uniform" when None, "zeros", "ones", "he_normal", ...) or
        a number (a constant); `regularizer`: None or {"l1": a, "l2": b}."""
        if isinstance(shape, str):  # Keras 2's positional order: add_weight(name, shape)
            name, shape, initializer = shape, initializer, None
        if shape is None:
            shape = ()
        if name is None:
            name = f"variable_{len(self.weights)}"
        return self._add_weight(name, tuple(shape), initializer, trainable, dtype, regularizer)

    def __call__(self, *args, **kwargs):
        """Keras' layer call: ``layer(inputs, training=None, mask=None)`` plus the call
        arguments of the layer (initial_state, MultiHeadAttention's query/value/key/...,
        a Python layer's own); see kiln/keras/_calls.py."""
        if not self._origin_known:  # the first call: a functional model's, or a call()'s
            note_origin(self)
        return _calls.call(self, args, kwargs)

    def compute_mask(self, inputs, previous_mask=None):
        """Keras' compute_mask: the mask(s) the layer gives its outputs for these inputs and
        input mask(s); None for none. Override it (with supports_masking) in Python layers."""
        return _kiln._compute_mask(self, inputs, previous_mask)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # Keras 3: a layer overriding compute_mask supports masking.
        cls._kiln_custom_compute_mask = cls.compute_mask is not LayerMixin.compute_mask

    def _kiln_call(self, inputs, training, masks=None):
        return _calls.run_python_call(self, inputs, training, masks)

    def __setattr__(self, name, value):
        # Keras tracks sublayers assigned as attributes.
        if isinstance(value, _kiln._Layer) and not name.startswith("_"):
            self._track_layer(value)
        if name == "supports_masking":
            try:
                super().__setattr__(name, value)
            except TypeError:
                # set before super().__init__() (Keras 2 style): applied once the layer exists
                self.__dict__["_kiln_supports_masking"] = bool(value)
            return
        super().__setattr__(name, value)

    @property
    def dtype(self):
        """Keras' layer.dtype: the variable dtype of the layer's dtype_policy."""
        return self.variable_dtype

    @property
    def built(self):
        return _kiln._Layer.built.fget(self)

    @built.setter
    def built(self, value):
        """Keras 2 layers set ``self.built = True`` at the end of build; kiln sets the flag
        itself once build returns, so this is accepted and ignored."""

"""What kiln.keras.layers.Layer and kiln.keras.Model share on the Python side: the life cycle
of a layer subclassed in Python (``build`` / ``call`` / ``add_weight`` / ``get_config``), and
the class every layer or model object coming back from C++ gets (``wrap``).

The C++ objects are kiln::LayerImpl and kiln::ModelImpl (``kiln._kiln._Layer`` / ``_Model``);
a Python subclass runs through the PyLayer trampoline (python/src/keras_bindings.h), which calls
``build``, ``_kiln_call`` and ``get_config`` below."""
import inspect

from .. import _kiln

# class name -> Python class, for objects made in C++ (load_model, model.layers)
_CLASSES = {}


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


def _takes_training(fn):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "training" in params or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


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

    def _kiln_call(self, inputs, training):
        fn = self.call
        if _takes_training(fn):
            return fn(inputs, training=training)
        return fn(inputs)

    def __setattr__(self, name, value):
        # Keras tracks sublayers assigned as attributes.
        if isinstance(value, _kiln._Layer) and not name.startswith("_"):
            self._track_layer(value)
        super().__setattr__(name, value)

    @property
    def dtype(self):
        return "float32"

    @property
    def built(self):
        return _kiln._Layer.built.fget(self)

    @built.setter
    def built(self, value):
        """Keras 2 layers set ``self.built = True`` at the end of build; kiln sets the flag
        itself once build returns, so this is accepted and ignored."""

"""kiln.keras.models: Model (functional: Model(inputs, outputs); or subclassed in Python),
Sequential, and load_model. The models are kiln::ModelImpl objects: compile, fit, evaluate
and predict are the C++ ones (python/src/keras_models_py.cc); this file adds Keras' Python
spellings (summary printing, History, the classes of objects coming back from C++)."""
import sys

from .. import _kiln
from . import _base

__all__ = ["Model", "Sequential", "Functional", "load_model"]


class ModelMixin(_base.LayerMixin):
    __slots__ = ()

    def summary(self, line_length=None, print_fn=None):
        """Prints Keras' summary table (layer, output shape, parameters)."""
        text = self.summary_string(line_length or 0)
        (print_fn or (lambda s: print(s, file=sys.stdout)))(text.rstrip("\n"))

    @property
    def layers(self):
        return [_base.wrap(layer) for layer in _kiln._Model.layers.fget(self)]

    def get_layer(self, name=None, index=None):
        layers = self.layers
        if index is not None:
            return layers[index]
        for layer in layers:
            if layer.name == name:
                return layer
        raise _kiln.Error(f"model {self.name!r} has no layer named {name!r}; its layers are "
                          f"{[layer.name for layer in layers]}")

    def fit(self, x=None, y=None, batch_size=None, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, class_weight=None,
            sample_weight=None, initial_epoch=0, steps_per_epoch=None, seed=0):
        """Keras' fit on numpy arrays (or kiln Tensors); returns a History whose .history maps
        each log ("loss", "accuracy", "val_loss", ...) to its per-epoch values.
        steps_per_epoch: batches per epoch, taken from a pass over the data that continues
        across epochs (Keras 3); without batch_size they make one pass."""
        history = _kiln._Model.fit(
            self, x, y, batch_size=batch_size, epochs=epochs,
            verbose=1 if verbose == "auto" else verbose, callbacks=callbacks,
            validation_split=validation_split, validation_data=validation_data,
            shuffle=shuffle, sample_weight=sample_weight, class_weight=class_weight,
            initial_epoch=initial_epoch, seed=seed, steps_per_epoch=steps_per_epoch)
        return history

    def evaluate(self, x=None, y=None, batch_size=None, verbose="auto", sample_weight=None,
                 callbacks=None, return_dict=False):
        return _kiln._Model.evaluate(
            self, x, y, batch_size=32 if batch_size is None else batch_size,
            verbose=1 if verbose == "auto" else verbose, sample_weight=sample_weight,
            callbacks=callbacks, return_dict=return_dict)

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """One training step on one batch (Keras): the loss as a float when the model has no
        metrics, else [loss, metric, ...] (Keras' order: output losses, then the metrics in
        compile order); return_dict=True gives the dict."""
        logs = _kiln._Model.train_on_batch(
            self, x, y, sample_weight=sample_weight, class_weight=class_weight)
        return _keras_results(logs, return_dict, self._log_keys())

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """The loss and metrics of one batch, in train_on_batch's form."""
        logs = _kiln._Model.test_on_batch(self, x, y, sample_weight=sample_weight)
        return _keras_results(logs, return_dict, self._log_keys())

    def predict(self, x, batch_size=None, verbose=0, callbacks=None):
        return _kiln._Model.predict(self, x, batch_size=32 if batch_size is None else batch_size,
                                    verbose=0 if verbose == "auto" else verbose,
                                    callbacks=callbacks)


def _keras_results(logs, return_dict, order):
    """Keras' form of a batch's logs: the dict, or the loss alone (a float) when it is the only
    entry, else the values in `order` (the model's log keys), then any others by name."""
    logs = {k: float(v) for k, v in logs.items()}
    if return_dict:
        return logs
    values = [logs[k] for k in order if k in logs]
    values += [v for k, v in sorted(logs.items()) if k not in order]
    return values[0] if len(values) == 1 else values


class Model(ModelMixin, _kiln._Model, metaclass=_base.KerasMeta):
    """Keras' Model. ``Model(inputs, outputs, name=None)`` with tensors from
    kiln.keras.Input makes a functional model; a Python subclass overriding ``call`` (and
    creating its layers in ``__init__``, tracked as attributes) makes a subclassed model."""

    __slots__ = ()
    _kiln_instance_of = _kiln._Model

    def __new__(cls, *args, **kwargs):
        if cls is Model and (args or "inputs" in kwargs):
            return Functional(*args, **kwargs)
        return super().__new__(cls)


class Functional(ModelMixin, _kiln._Functional, metaclass=_base.KerasMeta):
    """A functional model: the graph of layer calls from kiln.keras.Input tensors to
    `outputs` (kiln::FunctionalImpl)."""

    __slots__ = ()

    def __init__(self, inputs, outputs, name=None, **kwargs):
        if getattr(self, "_kiln_made", False):
            return  # Model(...) made it and Python calls __init__ again
        _kiln._Functional.__init__(self, inputs, outputs, name or "")
        self._kiln_made = True


class Sequential(ModelMixin, _kiln._Sequential, metaclass=_base.KerasMeta):
    """A stack of layers (kiln::SequentialImpl). The first item may be kiln.keras.Input(shape)
    (or the first layer may take ``input_shape=``): the model is then built at once."""

    __slots__ = ()

    def __init__(self, layers=None, name=None, trainable=True):
        layers = list(layers or [])
        input_shape = None
        if layers and isinstance(layers[0], _kiln.Tensor):
            input_shape = tuple(layers.pop(0).shape[1:])
        elif layers and getattr(layers[0], "_input_shape", None) is not None:
            input_shape = layers[0]._input_shape
        for layer in layers:
            if isinstance(layer, _kiln._Layer):
                _base.note_origin(layer)
        _kiln._Sequential.__init__(self, layers, input_shape, name or "")
        if not trainable:
            self.trainable = False

    def add(self, layer):
        if isinstance(layer, _kiln.Tensor):
            raise _kiln.Error("Sequential.add: give the input shape when making the model: "
                              "Sequential([kiln.keras.Input(shape), ...])")
        if isinstance(layer, _kiln._Layer):
            _base.note_origin(layer)
        _kiln._Sequential.add(self, layer)


for _cls in (Model, Sequential, Functional):
    _base.register_class(_cls)
del _cls


def load_model(filepath, custom_objects=None, compile=True):
    """A model saved by model.save(path): kiln's directory, or a Keras 3 ".keras" file (written
    by Keras or by kiln); architecture, weights and (unless compile=False) the compile
    configuration and optimizer state. Layers written in Python are rebuilt by the
    classes in `custom_objects` ({"ClassName": cls}; cls.from_config(config))."""
    model = _kiln._load_model(str(filepath), custom_objects, compile)
    model = _base.wrap(model)
    for layer in model.layers:
        _base.wrap(layer)
    return model

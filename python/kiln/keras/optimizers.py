"""kiln.keras.optimizers: SGD, Adam, AdamW and RMSprop (kiln::Optimizer) with Keras' arguments
and defaults, made from their Keras config by the C++ code that also rebuilds saved models.
`learning_rate` is a number, a schedule from kiln.keras.optimizers.schedules, or a Python
callable step -> rate written with kiln ops (traced into the training step). Hyperparameters
are variables: ``opt.learning_rate = 0.01`` or ``opt.set_hyperparameter("beta_1", 0.8)``
takes effect at the next compiled step without retracing."""
from .. import _kiln
from . import _base
from . import schedules  # noqa: F401

Optimizer = _kiln.Optimizer
__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "get", "schedules"]


def _make(class_name, learning_rate, clipnorm, clipvalue, global_clipnorm, **hyper):
    config = {k: v for k, v in hyper.items()}
    schedule = None
    if isinstance(learning_rate, (int, float)):
        config["learning_rate"] = float(learning_rate)
    else:
        schedule = learning_rate
    for k, v in (("clipnorm", clipnorm), ("clipvalue", clipvalue),
                 ("global_clipnorm", global_clipnorm)):
        if v is not None:
            config[k] = float(v)
    optimizer = _kiln._optimizer_from_config(class_name, config, schedule)
    _base.note_origin(optimizer)
    return optimizer


def SGD(learning_rate=0.01, momentum=0.0, nesterov=False, clipnorm=None, clipvalue=None,
        global_clipnorm=None):
    return _make("SGD", learning_rate, clipnorm, clipvalue, global_clipnorm,
                 momentum=float(momentum), nesterov=bool(nesterov))


def Adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=False,
         clipnorm=None, clipvalue=None, global_clipnorm=None):
    """amsgrad: keep the running maximum of the second moment ("velocity_hat") and divide by
    its square root (Keras 3)."""
    return _make("Adam", learning_rate, clipnorm, clipvalue, global_clipnorm,
                 beta_1=float(beta_1), beta_2=float(beta_2), epsilon=float(epsilon),
                 amsgrad=bool(amsgrad))


def AdamW(learning_rate=0.001, weight_decay=0.004, beta_1=0.9, beta_2=0.999, epsilon=1e-7,
          amsgrad=False, clipnorm=None, clipvalue=None, global_clipnorm=None):
    return _make("AdamW", learning_rate, clipnorm, clipvalue, global_clipnorm,
                 weight_decay=float(weight_decay), beta_1=float(beta_1), beta_2=float(beta_2),
                 epsilon=float(epsilon), amsgrad=bool(amsgrad))


def RMSprop(learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False,
            clipnorm=None, clipvalue=None, global_clipnorm=None):
    return _make("RMSprop", learning_rate, clipnorm, clipvalue, global_clipnorm,
                 rho=float(rho), momentum=float(momentum), epsilon=float(epsilon),
                 centered=bool(centered))


def get(identifier):
    """An optimizer by name ("adam", "sgd", ...) with Keras' defaults."""
    return identifier if isinstance(identifier, Optimizer) else Optimizer(identifier)

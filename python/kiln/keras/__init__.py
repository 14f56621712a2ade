"""kiln.keras: Keras-style layers and models over kiln's C++ API (no second implementation):
the built-in layers of kiln's layer registry, layers and models subclassed in Python,
Sequential and functional models, compile / fit / evaluate / predict on numpy arrays, losses,
optimizers, metrics, callbacks (also written in Python), save and load_model; keras.ops (over
kiln's numpy-style API), keras.random and keras.initializers.

    import numpy as np, kiln
    from kiln import keras
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3)])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    history = model.fit(x, y, epochs=5, batch_size=32)
"""
from . import callbacks, constraints, datasets, layers, losses, metrics, models, optimizers, utils
from . import initializers, ops, random
from . import config, mixed_precision
from .layers import Input, Layer
from .mixed_precision import DTypePolicy
from .models import Model, Sequential, load_model

__all__ = ["DTypePolicy", "config", "mixed_precision", "Input", "Layer", "Model", "Sequential", "callbacks", "constraints", "datasets", "layers",
           "load_model", "losses", "metrics", "models", "optimizers", "utils", "initializers",
           "ops", "random"]

"""kiln.keras.optimizers.schedules: learning rates as functions of the step
(kiln::LearningRateSchedule). Any Python callable step -> rate written with kiln ops may be
given as a learning rate too (it is traced into the training step; such a schedule cannot be
saved with the model)."""
from .. import _kiln

LearningRateSchedule = _kiln.LearningRateSchedule
__all__ = ["LearningRateSchedule", "ExponentialDecay"]


def ExponentialDecay(initial_learning_rate, decay_steps, decay_rate, staircase=False):
    """initial_learning_rate * decay_rate ** (step / decay_steps) (floored when staircase)."""
    return _kiln._exponential_decay(float(initial_learning_rate), int(decay_steps),
                                    float(decay_rate), bool(staircase))

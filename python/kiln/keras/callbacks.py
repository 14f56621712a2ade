"""kiln.keras.callbacks: Keras' hooks. Subclass Callback in Python and override any of
on_train_begin/end(logs), on_epoch_begin/end(epoch, logs), on_train_batch_begin/end(batch,
logs), on_test_*, on_predict_*; ``self.model`` is the model being trained (set
``self.model.stop_training = True`` to stop after the epoch) and ``self.params`` holds epochs,
steps and verbose. The built-in callbacks are kiln's C++ ones."""
from .. import _kiln

Callback = _kiln.Callback
History = _kiln.History
EarlyStopping = _kiln.EarlyStopping
ModelCheckpoint = _kiln.ModelCheckpoint
CSVLogger = _kiln.CSVLogger
LearningRateScheduler = _kiln.LearningRateScheduler
ReduceLROnPlateau = _kiln.ReduceLROnPlateau

__all__ = ["Callback", "History", "EarlyStopping", "ModelCheckpoint", "CSVLogger",
           "LearningRateScheduler", "ReduceLROnPlateau"]

"""kiln.keras.metrics: kiln's stateful metrics (kiln::Metric): update_state(y_true, y_pred,
sample_weight=None), result(), reset_state(). compile also takes their names ("accuracy",
"mae", ...)."""
from .. import _kiln

Metric = _kiln.Metric
_m = _kiln._metrics
__all__ = ["Metric", "SparseCategoricalAccuracy", "CategoricalAccuracy", "BinaryAccuracy",
           "Mean", "TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy",
           "MeanAbsoluteError", "Precision", "Recall", "AUC", "get"]


def SparseCategoricalAccuracy(name="sparse_categorical_accuracy"):
    return _m.sparse_categorical_accuracy(name)


def CategoricalAccuracy(name="categorical_accuracy"):
    return _m.categorical_accuracy(name)


def BinaryAccuracy(name="binary_accuracy", threshold=0.5):
    return _m.binary_accuracy(name, threshold)


def Mean(name="mean"):
    return _m.mean(name)


def TopKCategoricalAccuracy(k=5, name="top_k_categorical_accuracy"):
    return _m.top_k_categorical_accuracy(k, name)


def SparseTopKCategoricalAccuracy(k=5, name="sparse_top_k_categorical_accuracy"):
    return _m.sparse_top_k_categorical_accuracy(k, name)


def MeanAbsoluteError(name="mean_absolute_error"):
    return _m.mean_absolute_error(name)


def Precision(thresholds=0.5, name="precision"):
    return _m.precision(name, thresholds)


def Recall(thresholds=0.5, name="recall"):
    return _m.recall(name, thresholds)


def AUC(num_thresholds=200, name="auc"):
    return _m.auc(name, num_thresholds)


def get(identifier):
    return identifier if isinstance(identifier, Metric) else Metric(identifier)

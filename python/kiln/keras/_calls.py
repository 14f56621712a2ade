"""Keras' call conventions for kiln's layers (``layer(...)`` from Python):

- every layer: ``layer(inputs, training=None, mask=None)``; ``training=None`` takes the value
  of the enclosing layer call (False at the top), as in Keras; an explicit ``mask`` (a boolean
  tensor, or a list with one per input) is the inputs' mask for this call, and the outputs
  carry the mask the layer propagates in ``._keras_mask``;
- SimpleRNN, LSTM, GRU, Bidirectional, RNN: ``initial_state=[h]`` / ``[h, c]`` (also the
  second positional argument);
- SimpleRNNCell, LSTMCell, GRUCell: ``cell(inputs, states, training=None)`` gives
  ``(output, new_states)``;
- MultiHeadAttention: ``(query, value, key=None, query_mask=None, value_mask=None,
  key_mask=None, attention_mask=None, return_attention_scores=None, training=None,
  use_causal_mask=None)``; the output, or ``(output, scores)`` with return_attention_scores
  (None: the layer's configured value, False unless set in its constructor);
- layers and models written in Python: their ``call``'s own arguments, with ``training`` and
  ``mask`` filled in when ``call`` takes them (Keras 3: ``mask`` from the input's mask).

The C++ side is python/src/keras_calls_py.cc."""
import inspect

from .. import _kiln

_RECURRENT = ("SimpleRNN", "LSTM", "GRU", "Bidirectional", "RNN")
_CELLS = ("SimpleRNNCell", "LSTMCell", "GRUCell")
# The training flag of the layer calls in progress (innermost last).
_TRAINING = []
_PARAMS = {}


def _params(fn):
    """The names of `fn`'s parameters and whether it takes **kwargs (cached per function)."""
    key = getattr(fn, "__func__", fn)
    got = _PARAMS.get(key)
    if got is None:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = {}
        got = (frozenset(params),
               any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()))
        _PARAMS[key] = got
    return got


def _training(value):
    if value is None:
        return _TRAINING[-1] if _TRAINING else False
    return bool(value)


def _is_tensor_like(v):
    return isinstance(v, (_kiln.Tensor, _kiln.Variable)) or hasattr(v, "__array__")


def _unexpected(layer, kwargs, accepted):
    raise TypeError(
        f"layer {layer.name!r} ({layer.class_name}) got unexpected call argument(s) "
        f"{sorted(kwargs)}; its call takes {accepted}")


def _positional_tensors_only(layer, args):
    for a in args:
        if not (_is_tensor_like(a) or isinstance(a, (list, tuple))):
            raise TypeError(
                f"layer {layer.name!r} ({layer.class_name}): only input tensors may be passed "
                f"as positional arguments (as in Keras); pass {a!r} by keyword (e.g. "
                f"training={a!r})")


def call(layer, args, kwargs):
    """``layer(*args, **kwargs)`` for every kiln.keras layer and model."""
    if not args and "inputs" in kwargs:
        args = (kwargs.pop("inputs"),)
    if type(layer).call is not _base_call():
        return _call_python_layer(layer, args, kwargs)
    name = layer.class_name if getattr(type(layer), "_kiln_builtin", False) else None
    if name == "MultiHeadAttention":
        return _call_attention(layer, args, kwargs)
    if not args:
        raise TypeError(f"layer {layer.name!r} ({layer.class_name}) was called without inputs")
    inputs, rest = args[0], list(args[1:])
    training = kwargs.pop("training", None)
    mask = kwargs.pop("mask", None)
    if name in _CELLS:
        return _call_cell(layer, inputs, rest, kwargs, training, mask)
    if name in _RECURRENT:
        initial_state = kwargs.pop("initial_state", None)
        if rest and initial_state is None:
            initial_state = rest.pop(0)
        accepted = "(sequences, initial_state=None, mask=None, training=None)"
        if rest or kwargs:
            _unexpected(layer, list(kwargs) + [f"positional {len(rest)}"] * bool(rest),
                        accepted)
        if initial_state is not None:
            states = list(initial_state) if isinstance(initial_state, (list, tuple)) \
                else [initial_state]
            if isinstance(inputs, (list, tuple)):
                raise TypeError(f"layer {layer.name!r} ({name}): give the initial states "
                                f"either in the inputs list or as initial_state=, not both")
            inputs = [inputs] + states
            if mask is not None:
                mask = [mask] + [None] * len(states)
    else:
        _positional_tensors_only(layer, rest)
        if rest:
            raise TypeError(f"layer {layer.name!r} ({layer.class_name}) takes its inputs as "
                            f"one argument (a tensor or a list of tensors); got "
                            f"{1 + len(rest)} positional arguments")
        if kwargs:
            _unexpected(layer, kwargs, "(inputs, training=None, mask=None)")
    return _kiln._layer_invoke(layer, inputs, mask, _training(training))


def _call_cell(layer, inputs, rest, kwargs, training, mask):
    """Keras' cell call: ``cell(inputs, states, training=None)`` -> ``(output, new_states)``,
    the new states a list when `states` is one (LSTMCell's always is: [h, c])."""
    states = kwargs.pop("states", None)
    if rest and states is None:
        states = rest.pop(0)
    if rest or kwargs or mask is not None or states is None:
        _unexpected(layer, list(kwargs) + [f"positional {len(rest)}"] * bool(rest)
                    + ["mask"] * (mask is not None) + ["(no states)"] * (states is None),
                    "(inputs, states, training=None)")
    nested = isinstance(states, (list, tuple))
    outs = _kiln._layer_invoke(layer, [inputs] + (list(states) if nested else [states]), None,
                               _training(training))
    new_states = list(outs[1:])
    return outs[0], (new_states if nested or len(new_states) > 1 else new_states[0])


def _base_call():
    from . import _base
    return _base.LayerMixin.call


def _call_attention(layer, args, kwargs):
    names = ("query", "value", "key")
    if len(args) > 3:
        raise TypeError(f"layer {layer.name!r} (MultiHeadAttention) takes query, value and key "
                        f"by position; pass the other arguments by keyword")
    _positional_tensors_only(layer, args)
    given = dict(zip(names, args))
    for k in names:
        if k in kwargs:
            if k in given:
                raise TypeError(f"layer {layer.name!r}: got multiple values for {k!r}")
            given[k] = kwargs.pop(k)
    query = given.get("query")
    value = given.get("value")
    if query is None:
        raise TypeError(f"layer {layer.name!r} (MultiHeadAttention) needs a query")
    masks = [kwargs.pop(k, None) for k in ("query_mask", "value_mask", "key_mask")]
    attention_mask = kwargs.pop("attention_mask", None)
    scores = kwargs.pop("return_attention_scores", None)
    causal = kwargs.pop("use_causal_mask", None)
    training = _training(kwargs.pop("training", None))
    if kwargs:
        _unexpected(layer, kwargs,
                    "(query, value, key=None, query_mask=None, value_mask=None, key_mask=None, "
                    "attention_mask=None, return_attention_scores=False, training=None, "
                    "use_causal_mask=False)")
    if value is None:
        if any(v is not None for v in [given.get("key"), attention_mask, scores, causal]) or \
                any(m is not None for m in masks):
            raise TypeError(f"layer {layer.name!r} (MultiHeadAttention) needs a value "
                            f"(Keras: layer(query, value, ...)); only a plain layer(x) means "
                            f"self-attention in kiln")
        return _kiln._layer_invoke(layer, query, None, training)
    return _kiln._attention_call(
        layer, query, value, given.get("key"), masks, attention_mask,
        None if scores is None else bool(scores), None if causal is None else bool(causal),
        training)


def _call_python_layer(layer, args, kwargs):
    """A layer or model written in Python: the C++ life cycle (build, masks, nodes) around its
    call, which gets the extra arguments of this call."""
    if not args:
        raise TypeError(f"layer {layer.name!r} ({type(layer).__name__}) was called without "
                        f"inputs")
    inputs, rest = args[0], args[1:]
    training = kwargs.pop("training", None)
    mask = kwargs.pop("mask", None)
    if rest or kwargs:
        names, var_kw = _params(layer.call)
        bad = [k for k in kwargs if k not in names and not var_kw]
        if bad:
            raise TypeError(f"{type(layer).__name__}.call() got unexpected keyword argument(s) "
                            f"{bad}")
        symbolic = [_kiln._has_keras_history(t) for t in
                    (inputs if isinstance(inputs, (list, tuple)) else [inputs])]
        if any(symbolic):
            raise _kiln.Error(
                f"layer {layer.name!r} ({type(layer).__name__}): call arguments other than the "
                f"inputs, training and mask ({list(kwargs) + ['positional'] * len(rest)}) are "
                f"not recorded in kiln's functional models; pass tensors in the inputs list, "
                f"and make other values constructor arguments of the layer")
        layer.__dict__["_kiln_extra"] = (tuple(rest), dict(kwargs))
    try:
        return _kiln._layer_invoke(layer, inputs, mask, _training(training))
    finally:
        layer.__dict__.pop("_kiln_extra", None)


def run_python_call(layer, inputs, training, masks):
    """What C++ runs for a Python layer's call (PyLayer, python/src/keras_bindings.h)."""
    args, kwargs = layer.__dict__.pop("_kiln_extra", ((), {}))
    fn = layer.call
    names, var_kw = _params(fn)
    if "training" in names or var_kw:
        kwargs.setdefault("training", training)
    if masks is not None and "mask" in names and kwargs.get("mask") is None:
        kwargs["mask"] = masks
    _TRAINING.append(training)
    try:
        return fn(inputs, *args, **kwargs)
    finally:
        _TRAINING.pop()

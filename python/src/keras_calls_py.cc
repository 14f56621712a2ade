// Keras' call conventions from Python (python/kiln/keras/_calls.py holds the argument
// parsing): a layer called with explicit masks (`layer(x, mask=m)`: the masks become the
// inputs' keras_mask, as Keras 3 takes an explicit mask as the input's previous mask),
// compute_mask, and MultiHeadAttention's keyword call (MultiHeadAttentionImpl::attend).
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "keras_bindings.h"
#include "kiln/keras/layers/attention.h"
#include "numpy_interop.h"

namespace kiln::python {
namespace {

bool is_sequence(const py::handle& v) {
  return py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v);
}

std::vector<Tensor> tensors_of(const py::handle& v) {
  std::vector<Tensor> out;
  if (is_sequence(v)) {
    for (const py::handle& t : v) out.push_back(to_tensor(t));
  } else {
    out.push_back(to_tensor(v));
  }
  return out;
}

// One mask per input (undefined: none), from None, a tensor (one input) or a list.
std::vector<Tensor> masks_of(const LayerImpl& layer, const py::handle& masks, size_t n_inputs) {
  std::vector<Tensor> out(n_inputs);
  if (masks.is_none()) return out;
  std::vector<py::handle> items;
  if (is_sequence(masks))
    for (const py::handle& m : masks) items.push_back(m);
  else
    items.push_back(masks);
  if (items.size() != n_inputs)
    throw Error("layer \"" + layer.name() + "\" (" + layer.class_name() + ") was called with " +
                std::to_string(n_inputs) + " input(s) and " + std::to_string(items.size()) +
                " mask(s); give one mask per input (None for an input without one)");
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].is_none()) continue;
    Tensor m = to_tensor(items[i]);
    if (m.dtype() != DType::b8)
      throw Error("layer \"" + layer.name() + "\" (" + layer.class_name() + "): mask " +
                  std::to_string(i) + " is a " + std::string(dtype_name(m.dtype())) +
                  " tensor; a Keras mask is boolean (True where a step is kept), e.g. "
                  "x != 0 computed in numpy or kiln.ops.not_equal");
    out[i] = m;
  }
  return out;
}

// The inputs carrying the explicit masks. A functional model's nodes record the inputs and
// take their masks from the layers that made them when the model runs, so an explicit mask on
// a symbolic (kiln.keras.Input) tensor would be dropped there: it is refused.
std::vector<Tensor> with_masks(const LayerImpl& layer, std::vector<Tensor> inputs,
                               const std::vector<Tensor>& masks) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!masks[i].defined()) continue;
    if (inputs[i].is_placeholder() || masks[i].is_placeholder())
      throw Error("layer \"" + layer.name() + "\" (" + layer.class_name() +
                  "): mask= on a symbolic tensor (a functional model under construction) is not "
                  "recorded in kiln's functional models; make the mask with a layer "
                  "(Embedding(mask_zero=True), Masking, or a Python layer's compute_mask): it "
                  "then flows to the next layers by itself");
    inputs[i] = inputs[i].with_keras_mask(masks[i]);
  }
  return inputs;
}

py::object one_or_list_of(std::vector<Tensor> out) {
  if (out.size() == 1) return py::cast(std::move(out[0]));
  py::list l;
  for (Tensor& t : out) l.append(py::cast(std::move(t)));
  return l;
}

// The masks as Keras' compute_mask returns them: None, one tensor, or a list per output.
py::object masks_to_py(const std::vector<Tensor>& masks) {
  if (masks.empty()) return py::none();
  if (masks.size() == 1) return masks[0].defined() ? py::cast(masks[0]) : py::none();
  py::list l;
  for (const Tensor& m : masks) l.append(m.defined() ? py::cast(m) : py::none());
  return l;
}

}  // namespace

void bind_keras_calls(py::module_& m) {
  m.def(
      "_layer_invoke",
      [](const py::handle& layer, const py::handle& inputs, const py::handle& masks,
         bool training) {
        Layer l = to_layer(layer);
        std::vector<Tensor> in = tensors_of(inputs);
        in = with_masks(l.impl(), in, masks_of(l.impl(), masks, in.size()));
        return one_or_list_of(l(in, training));
      },
      py::arg("layer"), py::arg("inputs"), py::arg("masks"), py::arg("training"),
      "Keras' layer(inputs, training=..., mask=...): `masks` is None, one mask or a list "
      "(one per input); a result of one tensor is returned as such, several as a list.");
  m.def(
      "_compute_mask",
      [](const py::handle& layer, const py::handle& inputs, const py::handle& masks) {
        Layer l = to_layer(layer);
        std::vector<Tensor> in = tensors_of(inputs);
        std::vector<Tensor> ms = masks_of(l.impl(), masks, in.size());
        LayerImpl& impl = l.impl();
        // A Python subclass's own compute_mask is the caller; its base is the C++ class's.
        if (auto* p = dynamic_cast<PyLayer<LayerImpl>*>(&impl))
          return masks_to_py(p->LayerImpl::compute_mask(in, ms));
        if (auto* p = dynamic_cast<PyLayer<ModelImpl>*>(&impl))
          return masks_to_py(p->ModelImpl::compute_mask(in, ms));
        return masks_to_py(impl.compute_mask(in, ms));
      },
      py::arg("layer"), py::arg("inputs"), py::arg("masks"),
      "The masks the layer gives its outputs for these inputs and input masks (Keras' "
      "compute_mask): None, a mask, or a list per output.");
  m.def(
      "_build_layer",
      [](const py::handle& layer, const py::handle& shape) {
        // One shape, or a list of shapes (several inputs); LayerImpl::maybe_build.
        bool many = py::len(shape) > 0 && is_sequence(shape[py::int_(0)]);
        std::vector<Shape> shapes;
        if (many)
          for (const py::handle& s : shape) shapes.push_back(shape_from_py(s));
        else
          shapes.push_back(shape_from_py(shape));
        to_layer(layer)->maybe_build(shapes);
      },
      py::arg("layer"), py::arg("input_shape"),
      "Builds a built-in layer for these input shapes (once, as its first call would).");
  m.def(
      "_has_keras_history",
      [](const py::handle& t) {
        return py::isinstance<Tensor>(t) && t.cast<const Tensor&>().is_placeholder();
      },
      py::arg("tensor"), "Whether `tensor` is symbolic (from kiln.keras.Input).");
  m.def(
      "_attention_call",
      [](const py::handle& layer, const py::handle& query, const py::handle& value,
         const py::handle& key, const py::handle& masks, const py::handle& attention_mask,
         std::optional<bool> return_attention_scores, std::optional<bool> use_causal_mask,
         bool training) -> py::object {
        Layer l = to_layer(layer);
        auto* mha = dynamic_cast<MultiHeadAttentionImpl*>(&l.impl());
        if (mha == nullptr)
          throw Error("layer \"" + l->name() + "\" is a " + l->class_name() +
                      ", not a MultiHeadAttention");
        std::vector<Tensor> in{to_tensor(query), to_tensor(value),
                               key.is_none() ? Tensor() : to_tensor(key)};
        std::vector<Tensor> ms = masks_of(*mha, masks, 3);
        if (!in[2].defined() && ms[2].defined())
          throw Error("layer \"" + mha->name() + "\": key_mask given without a key");
        for (size_t i = 0; i < 3; ++i)
          if (in[i].defined()) in[i] = with_masks(*mha, {in[i]}, {ms[i]})[0];
        AttentionCallOptions call;
        if (!attention_mask.is_none()) call.attention_mask = to_tensor(attention_mask);
        call.return_attention_scores = return_attention_scores;
        call.use_causal_mask = use_causal_mask;
        std::vector<Tensor> out = mha->attend(in[0], in[1], in[2], call, training);
        if (out.size() == 1) return py::cast(std::move(out[0]));
        return py::make_tuple(std::move(out[0]), std::move(out[1]));
      },
      py::arg("layer"), py::arg("query"), py::arg("value"), py::arg("key"), py::arg("masks"),
      py::arg("attention_mask"), py::arg("return_attention_scores"), py::arg("use_causal_mask"),
      py::arg("training"),
      "Keras' MultiHeadAttention call (MultiHeadAttentionImpl::attend): the output, or "
      "(output, scores) with return_attention_scores.");
}

}  // namespace kiln::python

// The Keras-style part of `kiln._kiln` (issue 19): layers (keras_layers_py.cc), models and
// their training entry points (keras_models_py.cc), losses, optimizers, metrics and callbacks
// (keras_training_py.cc). Each binds the C++ API of keras/layers, keras/models,
// keras/training and keras/saving; python/kiln/keras/ adds the Keras spellings.
#pragma once

#include <pybind11/pybind11.h>

#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "bindings.h"
#include "kiln/keras/data/arrays.h"
#include "kiln/keras/layers/layer.h"
#include "kiln/keras/models/model.h"

namespace kiln::python {

void bind_keras_layers(py::module_& m);
void bind_keras_models(py::module_& m);
void bind_keras_training(py::module_& m);

// JSON <-> Python (dicts, lists, str, numbers, bools, None), through Python's json module.
Json to_json(const py::handle& value);
py::object from_json(const Json& value);
// (None, 64) <-> kiln::Shape (None: kUnknownDim).
py::tuple shape_to_py(const Shape& shape);
Shape shape_from_py(const py::handle& shape);
// x / y / sample_weight of fit and friends: None, one array, a list or tuple (per input or
// output) or a dict by input/output name; arrays are numpy arrays, Tensors or Variables.
Arrays to_arrays(const py::handle& value);
// A Layer handle from a Python layer object (kiln.keras.layers.Layer or a model).
Layer to_layer(const py::handle& value);

inline py::object one_or_list(const std::vector<Tensor>& ts);

// Python subclasses of kiln.keras.layers.Layer (Base = LayerImpl) and kiln.keras.Model
// (Base = ModelImpl): build, call and get_config run the Python methods, under the GIL
// (taken here: fit and the traced steps run with it released). The Python instance is held
// by `self` from Layer.__init__ on (attach), so a layer stays whole while C++ holds it
// (a model's layer list, a functional node); the price is that such a layer is never freed.
template <class Base>
class PyLayer : public Base {
 public:
  using Base::Base;

  void attach(py::object self) { self_ = std::move(self); }
  bool attached() const { return static_cast<bool>(self_); }

  void build(const Shape& input_shape) override {
    if (!self_) return Base::build(input_shape);
    py::gil_scoped_acquire gil;
    self_.attr("build")(shape_to_py(input_shape));
  }
  void build_many(const std::vector<Shape>& input_shapes) override {
    if (!self_ || input_shapes.size() == 1) return Base::build_many(input_shapes);
    py::gil_scoped_acquire gil;
    py::list shapes;
    for (const Shape& s : input_shapes) shapes.append(shape_to_py(s));
    self_.attr("build")(shapes);
  }
  Tensor call(const Tensor& inputs, bool training) override {
    std::vector<Tensor> out = call_many({inputs}, training);
    if (out.size() != 1)
      throw Error("layer \"" + this->name() + "\" (" + this->class_name() + ") returned " +
                  std::to_string(out.size()) + " tensors where one was expected");
    return out[0];
  }
  std::vector<Tensor> call_many(const std::vector<Tensor>& inputs, bool training) override {
    if (!self_) return Base::call_many(inputs, training);
    py::gil_scoped_acquire gil;
    return call_results(self_.attr("_kiln_call")(one_or_list(inputs), training, py::none()));
  }
  // The inputs' masks reach a Python call that takes `mask` (Keras 3 fills it in).
  std::vector<Tensor> call_masked(const std::vector<Tensor>& inputs,
                                  const std::vector<Tensor>& masks, bool training) override {
    if (!self_) return Base::call_masked(inputs, masks, training);
    py::gil_scoped_acquire gil;
    return call_results(
        self_.attr("_kiln_call")(one_or_list(inputs), training, one_or_list(masks)));
  }
  // A compute_mask written in Python (run when supports_masking is set, as Keras does).
  std::vector<Tensor> compute_mask(const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& masks) override {
    if (!self_) return Base::compute_mask(inputs, masks);
    py::gil_scoped_acquire gil;
    if (!py::getattr(self_, "_kiln_custom_compute_mask", py::bool_(false)).cast<bool>())
      return Base::compute_mask(inputs, masks);
    if (!this->supports_masking) return {};
    py::object out = self_.attr("compute_mask")(one_or_list(inputs), one_or_list(masks));
    std::vector<Tensor> result;
    if (out.is_none()) return result;
    if (py::isinstance<py::list>(out) || py::isinstance<py::tuple>(out)) {
      for (const py::handle& m : out) result.push_back(m.is_none() ? Tensor() : to_tensor(m));
    } else {
      result.push_back(to_tensor(out));
    }
    return result;
  }
  Json get_config() const override {
    if (!self_) return Base::get_config();
    py::gil_scoped_acquire gil;
    return to_json(self_.attr("get_config")());
  }

 private:
  std::vector<Tensor> call_results(const py::object& out) const;
  py::object self_;
};

// One tensor (or None for an undefined one) when there is one, else a list.
inline py::object one_or_list(const std::vector<Tensor>& ts) {
  auto one = [](const Tensor& t) { return t.defined() ? py::cast(t) : py::none(); };
  if (ts.size() == 1) return one(ts[0]);
  py::list l;
  for (const Tensor& t : ts) l.append(one(t));
  return l;
}

template <class Base>
std::vector<Tensor> PyLayer<Base>::call_results(const py::object& out) const {
  std::vector<Tensor> tensors;
  if (py::isinstance<py::list>(out) || py::isinstance<py::tuple>(out)) {
    for (const py::handle& t : out) tensors.push_back(to_tensor(t));
  } else if (out.is_none()) {
    throw py::type_error("layer \"" + this->name() + "\" (" + this->class_name() +
                         "): call returned None; return a kiln.Tensor or a list of them");
  } else {
    tensors.push_back(to_tensor(out));
  }
  return tensors;
}

}  // namespace kiln::python

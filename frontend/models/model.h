// Model: a layer that can be trained (Keras' Model). Three ways to make one:
//  - Sequential: a stack of layers (models/sequential.h);
//  - functional: Model(inputs, outputs) over the DAG of layer calls made on kiln::Input
//    tensors (models/functional.h);
//  - subclassed: derive from ModelImpl, create sublayers with track(...), override call.
// compile/fit/evaluate/predict run traced steps by default: the training step (forward, loss,
// gradients, optimizer update), the test step and the predict step are each a kiln::function,
// traced once per batch shape and then run as graphs. run_eagerly=true runs them eagerly; both
// modes give the same results (the graph runs the same kernels in the same order).
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "frontend/function/concrete_function.h"
#include "frontend/layers/layer.h"
#include "frontend/training/callback.h"
#include "frontend/training/loss.h"
#include "frontend/training/metric.h"
#include "frontend/training/optimizer.h"

namespace kiln {

// Option structs give every member a default initializer, so designated initializers
// ({.epochs = 5}) compile warning-free under -Wextra.
struct CompileOptions {
  Optimizer optimizer = "rmsprop";
  Loss loss{};
  std::vector<Metric> metrics{};
  bool run_eagerly = false;
};

struct FitOptions {
  int64_t batch_size = 32;
  int epochs = 1;
  int verbose = 1;  // 0 silent, 1 progress bar, 2 one line per epoch
  std::vector<CallbackPtr> callbacks{};
  double validation_split = 0;  // the last fraction of the data, before shuffling (Keras)
  std::optional<std::pair<Tensor, Tensor>> validation_data{};
  bool shuffle = true;
  uint64_t seed = 0;  // shuffling seed
  int initial_epoch = 0;
};

struct EvaluateOptions {
  int64_t batch_size = 32;
  int verbose = 1;
  std::vector<CallbackPtr> callbacks{};
};

struct PredictOptions {
  int64_t batch_size = 32;
  int verbose = 0;
  std::vector<CallbackPtr> callbacks{};
};

class ModelImpl : public LayerImpl {
 public:
  explicit ModelImpl(std::string class_name = "Model", std::string name = "");

  // ---- training (frontend/training/fit.cc) ----
  void compile(CompileOptions options);
  bool compiled() const { return compiled_.has_value(); }
  const CompileOptions& compile_options() const;
  std::shared_ptr<History> fit(const Tensor& x, const Tensor& y, FitOptions options = {});
  Logs evaluate(const Tensor& x, const Tensor& y, EvaluateOptions options = {});
  Tensor predict(const Tensor& x, PredictOptions options = {});
  Logs train_on_batch(const Tensor& x, const Tensor& y);
  Logs test_on_batch(const Tensor& x, const Tensor& y);
  // Set by a callback (EarlyStopping) to end fit after the current epoch.
  bool stop_training = false;

  // ---- description (models/summary.cc) ----
  // Keras' summary table: Layer (type), Output Shape, Param # (+ Connected to for
  // functional models) and the parameter totals.
  void summary(std::ostream& os, int line_length = 0) const;
  std::string summary_string(int line_length = 0) const;
  // The layers in order: Sequential's list, a functional model's layers by depth, or a
  // subclassed model's tracked sublayers.
  virtual std::vector<Layer> layers() const;
  // Output shape of each layer for the summary, Keras' rule: from the layer's last
  // functional-model node, else computed from the shapes it was built with, else "?".
  virtual std::vector<std::string> layer_output_shapes() const;
  // Rows of the "Connected to" column, or empty for non-functional models.
  virtual std::vector<std::string> layer_connections() const { return {}; }

  // ---- weights I/O (frontend/io/weights_io.cc): safetensors, names like "dense_1/kernel" ----
  void save_weights(const std::string& path) const;
  void load_weights(const std::string& path);

  // The traced steps fit/evaluate/predict use when !run_eagerly (created on first use; a new
  // compile() makes new ones). Exposed for kiln dump-ir and tests.
  ConcreteFunction train_step_function(const Tensor& x, const Tensor& y);
  // One step each, in the compiled mode (traced unless run_eagerly): {loss, y_pred}.
  std::pair<Tensor, Tensor> run_train_step(const Tensor& x, const Tensor& y);
  std::pair<Tensor, Tensor> run_test_step(const Tensor& x, const Tensor& y);
  Tensor run_predict_step(const Tensor& x);

 private:
  std::optional<CompileOptions> compiled_;
  std::shared_ptr<struct ModelSteps> steps_;
};

namespace detail {
// Keras' summary text for output shapes: "(None, 64)" (dimensions joined by ", ", so a
// rank-1 shape is "(None)"); several outputs as "[(None, 3), (None, 4)]".
std::string summary_shape_text(const std::vector<Shape>& shapes);
// Keras' format_layer_shape for any layer (see ModelImpl::layer_output_shapes).
std::string layer_shape_text(const Layer& layer);
}  // namespace detail

// A handle to any model (Sequential, functional or subclassed).
class Model : public Layer {
 public:
  Model() = default;
  explicit Model(std::shared_ptr<ModelImpl> impl) : Layer(std::move(impl)) {}
  // Functional model from symbolic inputs and outputs (see models/functional.h).
  Model(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
        const std::string& name = "");
  Model(const Tensor& input, const Tensor& output, const std::string& name = "")
      : Model(std::vector<Tensor>{input}, std::vector<Tensor>{output}, name) {}
  ModelImpl* operator->() const { return &get(); }
  ModelImpl& get() const;
};

}  // namespace kiln

// The options of compile, fit, evaluate and predict (Keras' arguments of the same names).
//
// A model with several outputs takes one loss for all outputs, a list in the model's output
// order or losses by output name; loss weights and metrics likewise. The training loss is
//   loss = sum over outputs of loss_weight[o] * loss[o](y_true[o], y_pred[o], sample_weight[o])
//          + the layers' regularization losses,
// and the logs name each part as Keras does: "loss", "<output>_loss" (weighted, only with
// several outputs), "<metric>" or "<output>_<metric>", and "val_..." for validation data.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/keras/data/arrays.h"
#include "kiln/keras/training/callback.h"
#include "kiln/keras/training/loss.h"
#include "kiln/keras/training/metric.h"
#include "kiln/keras/training/optimizer.h"

namespace kiln {

namespace data {
class Dataset;  // keras/data/pipeline.h
}

// compile's `loss`: one loss (every output), a list (one per output, in order) or a map by
// output name (outputs left out get no loss; Keras allows that too).
class LossSpec {
 public:
  LossSpec() = default;
  LossSpec(Loss loss) : single_(std::move(loss)) {}             // NOLINT: implicit
  LossSpec(const char* name) : LossSpec(Loss(name)) {}          // NOLINT: implicit
  LossSpec(const std::string& name) : LossSpec(Loss(name)) {}   // NOLINT: implicit
  LossSpec(std::vector<Loss> list) : list_(std::move(list)) {}  // NOLINT: implicit
  LossSpec(std::initializer_list<Loss> list) : list_(list) {}   // NOLINT: implicit
  static LossSpec by_output(std::map<std::string, Loss> losses);

  bool defined() const { return single_.defined() || !list_.empty() || !by_name_.empty(); }
  // One loss per output (undefined: none). kiln::Error naming the outputs when a list has
  // another length, a name is not an output, or no output gets a loss.
  std::vector<Loss> for_outputs(const std::vector<std::string>& outputs,
                                const std::string& model) const;
  // The loss shared by every output, when one was given as such.
  const Loss& single() const { return single_; }
  const std::vector<Loss>& list() const { return list_; }
  const std::map<std::string, Loss>& by_name() const { return by_name_; }

 private:
  Loss single_;
  std::vector<Loss> list_;
  std::map<std::string, Loss> by_name_;
};

// compile's `loss_weights`: none (every weight 1), a list (one per output) or a map by output
// name (outputs left out weigh 1). Weights must be finite and >= 0.
class LossWeights {
 public:
  LossWeights() = default;
  LossWeights(std::vector<double> list) : list_(std::move(list)) {}  // NOLINT: implicit
  LossWeights(std::initializer_list<double> list) : list_(list) {}   // NOLINT: implicit
  static LossWeights by_output(std::map<std::string, double> weights);
  std::vector<double> for_outputs(const std::vector<std::string>& outputs,
                                  const std::string& model) const;
  const std::vector<double>& list() const { return list_; }
  const std::map<std::string, double>& by_name() const { return by_name_; }

 private:
  std::vector<double> list_;
  std::map<std::string, double> by_name_;
};

// compile's `metrics` and `weighted_metrics`: a flat list applied to every output (tf.keras'
// rule; each output gets its own copy with its own state), a list of lists (one per output)
// or lists by output name.
class MetricSpec {
 public:
  MetricSpec() = default;
  MetricSpec(std::vector<Metric> all) : all_(std::move(all)) {}  // NOLINT: implicit
  MetricSpec(std::initializer_list<Metric> all) : all_(all) {}   // NOLINT: implicit
  static MetricSpec per_output(std::vector<std::vector<Metric>> lists);
  static MetricSpec by_output(std::map<std::string, std::vector<Metric>> lists);
  bool empty() const { return all_.empty() && per_output_.empty() && by_name_.empty(); }
  // Fresh metrics per output ("accuracy" resolved against that output's loss). kiln::Error
  // naming the outputs for a list of lists of another length or an unknown output name.
  std::vector<std::vector<Metric>> for_outputs(const std::vector<std::string>& outputs,
                                               const std::vector<Loss>& losses,
                                               const std::string& model) const;
  const std::vector<Metric>& all() const { return all_; }
  const std::vector<std::vector<Metric>>& per_output() const { return per_output_; }
  const std::map<std::string, std::vector<Metric>>& by_name() const { return by_name_; }

 private:
  std::vector<Metric> all_;
  std::vector<std::vector<Metric>> per_output_;
  std::map<std::string, std::vector<Metric>> by_name_;
};

// Option structs give every member a default initializer, so designated initializers
// ({.epochs = 5}) compile warning-free under -Wextra.
struct CompileOptions {
  Optimizer optimizer = "rmsprop";
  LossSpec loss{};
  LossWeights loss_weights{};
  MetricSpec metrics{};           // unweighted
  MetricSpec weighted_metrics{};  // weighted by sample_weight / class_weight
  bool run_eagerly = false;
};

// fit's `class_weight`: class id -> weight (classes left out weigh 1, as in Keras 3), for a
// single-output model; for several outputs, give them by output name (Keras 1 style; Keras 3
// refuses class weights for several outputs). A class's id is the integer label, the argmax of
// a one-hot label, or the rounded value of a single probability-style label. Multiplies any
// sample_weight (tf.keras: "class_weight and sample_weight are multiplicative").
class ClassWeight {
 public:
  ClassWeight() = default;
  ClassWeight(std::map<int64_t, double> weights)  // NOLINT: implicit
      : single_(std::move(weights)) {}
  ClassWeight(std::initializer_list<std::pair<const int64_t, double>> weights)  // NOLINT
      : single_(weights) {}
  static ClassWeight by_output(std::map<std::string, std::map<int64_t, double>> weights);
  bool empty() const { return single_.empty() && by_name_.empty(); }
  // Per output: the map to apply (empty: none). kiln::Error for unknown names, negative or
  // non-finite weights, or one map for a model with several outputs.
  std::vector<std::map<int64_t, double>> for_outputs(const std::vector<std::string>& outputs,
                                                     const std::string& caller) const;

 private:
  std::map<int64_t, double> single_;
  std::map<std::string, std::map<int64_t, double>> by_name_;
};

// Validation data for fit: inputs, targets and optional sample weights, or a Dataset of
// batches (evaluated for validation_steps batches, or a whole pass).
struct ValidationData {
  Arrays x, y, sample_weight;
  std::shared_ptr<data::Dataset> dataset;
  ValidationData(Arrays x_, Arrays y_, Arrays w = {})
      : x(std::move(x_)), y(std::move(y_)), sample_weight(std::move(w)) {}
  ValidationData(const std::pair<Tensor, Tensor>& xy)  // NOLINT: implicit
      : x(xy.first), y(xy.second) {}
  ValidationData(const data::Dataset& ds);  // NOLINT: implicit
};

struct FitOptions {
  int64_t batch_size = 32;
  int epochs = 1;
  int verbose = 1;  // 0 silent, 1 progress bar, 2 one line per epoch
  std::vector<CallbackPtr> callbacks{};
  double validation_split = 0;  // the last fraction of the data, before shuffling (Keras)
  std::optional<ValidationData> validation_data{};
  bool shuffle = true;
  uint64_t seed = 0;  // shuffling seed
  int initial_epoch = 0;
  Arrays sample_weight{};  // per example: one tensor (every output), a list or by output name
  ClassWeight class_weight{};
  // Batches per epoch (-1: one whole pass per epoch; needed for an endless Dataset). With it,
  // epochs continue one pass (Keras 3). A Dataset that runs out stops training with a warning;
  // tensors start a new (reshuffled) pass at the next epoch, after a short epoch and a warning
  // when steps_per_epoch does not divide the batches of a pass.
  int64_t steps_per_epoch = -1;
  int64_t validation_steps = -1;  // batches of a validation Dataset per evaluation (-1: a pass)
  // Data-parallel training over the ranks of kiln::distributed (docs/distributed.md): every
  // rank runs this fit with the same model and data; each takes its rows of every global batch
  // of batch_size (or Dataset element), the step all-reduces the gradients (an all_reduce node
  // in the compiled step), and every rank applies the same update. Rank 0's weights and
  // optimizer state are broadcast at the start; losses and metrics are those of the global
  // batch on every rank; only rank 0 prints progress. Launched without mpirun: one process.
  bool data_parallel = false;
};

struct EvaluateOptions {
  int64_t batch_size = 32;
  int verbose = 1;
  std::vector<CallbackPtr> callbacks{};
  Arrays sample_weight{};
  int64_t steps = -1;  // Dataset input only: batches to evaluate (-1: one whole pass)
  // Sharded across the ranks of kiln::distributed (docs/distributed.md): every rank takes its
  // rows of each batch, the losses are summed with the ranks' shares and the predictions
  // gathered, so the results are those of the whole data, bitwise equal on every rank. The
  // ranks must hold the same weights (as after fit with data_parallel, which evaluates its
  // validation data this way). A world of one evaluates as without it.
  bool data_parallel = false;
};

struct PredictOptions {
  int64_t batch_size = 32;
  int verbose = 0;
  std::vector<CallbackPtr> callbacks{};
};

}  // namespace kiln

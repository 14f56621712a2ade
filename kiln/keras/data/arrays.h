// Arrays: what Keras' fit, evaluate, predict and train_on_batch take as x, y or sample_weight:
// one tensor, a list of tensors (one per model input or output, in the model's order) or
// tensors by input/output name. Examples lie along axis 0 of every tensor.
//
//   model->fit(x, y);                                   // one input, one output
//   model->fit({x_image, x_meta}, {y_class, y_box});    // lists, in the model's order
//   model->fit(Arrays::by_name({{"image", xi}, {"meta", xm}}), y);
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "kiln/frontend/tensor.h"

namespace kiln {

class Arrays {
 public:
  // None (no sample weights, no validation targets).
  Arrays() = default;
  Arrays(Tensor t);                  // NOLINT: implicit, one tensor
  Arrays(std::vector<Tensor> list);  // NOLINT: implicit, a list
  Arrays(std::initializer_list<Tensor> list) : Arrays(std::vector<Tensor>(list)) {}
  static Arrays by_name(std::map<std::string, Tensor> tensors);

  bool empty() const { return tensors_.empty(); }
  // One tensor given as such (not a list of one): for sample weights it serves every output.
  bool single() const { return single_; }
  bool named() const { return !names_.empty(); }
  size_t size() const { return tensors_.size(); }
  // The entries: in the given order, or sorted by name when named.
  const std::vector<Tensor>& tensors() const { return tensors_; }
  // The names of a named Arrays (parallel to tensors()); empty otherwise.
  const std::vector<std::string>& names() const { return names_; }

  // The entries in the model's order. `names` are the model's input or output names, `role`
  // says which ("input", "target", "sample weight") and `caller` names the API ("fit").
  // Throws kiln::Error naming what was given and what was expected when the count differs
  // from names.size(), a name is unknown or missing, or a tensor is undefined. With
  // `for_weights` (sample weights): one tensor serves every name (Keras' rule) and names left
  // out of a named Arrays give undefined tensors (unweighted).
  std::vector<Tensor> in_order(const std::vector<std::string>& names, const std::string& role,
                               const std::string& caller, bool for_weights = false) const;

  // The number of examples (axis 0), the same for every entry; kiln::Error (naming the
  // shapes) when they differ, an entry is a scalar, or there is none.
  int64_t num_examples(const std::string& what) const;
  // Rows `rows` (axis 0) of every entry, keeping the structure.
  Arrays take_rows(const std::vector<int64_t>& rows) const;
  // The same structure with other tensors (parallel to tensors()).
  Arrays with_tensors(std::vector<Tensor> tensors) const;
  // "a tensor of shape [8, 3]", "2 tensors [8, 3], [8]", "tensors named a [8, 3], b [8]".
  std::string describe() const;

 private:
  std::vector<Tensor> tensors_;
  std::vector<std::string> names_;
  bool single_ = false;
};

}  // namespace kiln

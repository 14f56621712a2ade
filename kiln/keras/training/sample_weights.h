// Sample weights shared by losses, metrics and fit: aligning weights with per-sample values
// and turning class weights into sample weights (Keras' class_weight).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "kiln/frontend/tensor.h"

namespace kiln::detail {

// The sample weights `w` aligned with per-sample values `v`: `w` of v's shape or of its leading
// axes ([batch] for [batch, timesteps] values), possibly with one trailing 1 more; returned
// with trailing axes of 1 added so that it broadcasts against `v`, cast to v's dtype. Concrete
// weights must be >= 0. kiln::Error naming `who` (the loss or metric), both shapes otherwise.
Tensor aligned_sample_weights(const std::string& who, const Tensor& w, const Tensor& v);

// Per-sample weights from class weights: the class of a sample is its integer label (integer
// dtype), the argmax of a one-hot label (floating, last axis > 1), or its rounded value (a
// floating label with a last axis of 1 or no class axis: binary labels). Classes missing from
// `weights` weigh 1 (Keras 3). The result is float32 of the labels' sample shape (y's shape
// without a class axis or trailing 1). `y` must be concrete.
Tensor class_sample_weights(const Tensor& y, const std::map<int64_t, double>& weights,
                            const std::string& who);

}  // namespace kiln::detail

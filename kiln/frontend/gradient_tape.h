// GradientTape: reverse-mode automatic differentiation, as in TensorFlow.
//
// While a tape is alive on a thread it records every op that has a watched input (a tensor
// passed to watch(), or the output of an op the tape recorded). gradient(target, sources)
// runs the gradient rules backwards from target. Gradient rules are written with kiln ops, so
// an outer tape records them: a tape inside a tape gives higher-order gradients.
// Tapes nest and must be destroyed in reverse order of creation (ordinary scoping does this).
#pragma once

#include <memory>
#include <vector>

#include "kiln/frontend/tensor.h"
#include "kiln/frontend/variable.h"

namespace kiln {

enum class UnconnectedGradients {
  kNone,  // an unconnected source gets an undefined Tensor (defined() == false)
  kZero,  // an unconnected source gets zeros of its shape
};

class GradientTape {
 public:
  explicit GradientTape(bool persistent = false);
  ~GradientTape();
  GradientTape(const GradientTape&) = delete;
  GradientTape& operator=(const GradientTape&) = delete;

  // Starts tracking `x` (a floating tensor) so ops using it are recorded.
  void watch(const Tensor& x);
  void watch(const std::vector<Tensor>& xs);
  std::vector<Tensor> watched() const;

  // d(target)/d(source) for each source. A non-scalar target is treated as sum(target), or
  // weighted by `output_gradient` (same shape as target) when given. A non-persistent tape
  // allows one call; a persistent one any number.
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Tensor>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kNone,
                               const Tensor& output_gradient = Tensor());
  Tensor gradient(const Tensor& target, const Tensor& source,
                  UnconnectedGradients unconnected = UnconnectedGradients::kNone);
  // Gradients with respect to variables' current values (trainable variables read while the
  // tape recorded are watched automatically).
  std::vector<Tensor> gradient(const Tensor& target, const std::vector<Variable>& sources,
                               UnconnectedGradients unconnected = UnconnectedGradients::kNone);

  // Forgets everything recorded and watched (the tape keeps recording).
  void reset();
  bool persistent() const;

  // While alive, this tape records nothing (other tapes are unaffected).
  class StopRecording {
   public:
    explicit StopRecording(GradientTape& tape);
    ~StopRecording();
    StopRecording(const StopRecording&) = delete;
    StopRecording& operator=(const StopRecording&) = delete;

   private:
    GradientTape& tape_;
    bool was_recording_;
  };

  struct State;

 private:
  std::unique_ptr<State> state_;
};

}  // namespace kiln

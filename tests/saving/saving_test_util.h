// Helpers of the saving tests: a temporary directory, bitwise comparisons of tensors and of
// models' variables, and a custom layer with its factory.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

#include "kiln/kiln.h"

namespace kiln::test {

// A fresh directory under the system's temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "kiln_saving_test_XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

// Same dtype, shape and bytes (compared as their safetensors encodings: the row-major bytes).
inline void expect_bitwise_equal(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.type().to_string(), b.type().to_string()) << what;
  EXPECT_TRUE(encode_safetensors({{"x", a}}) == encode_safetensors({{"x", b}}))
      << what << " differs";
}

// Every variable (weights and seed-generator states) of both models, in order, bitwise.
inline void expect_same_variables(const Model& a, const Model& b) {
  std::vector<Variable> va = a->variables(), vb = b->variables();
  ASSERT_EQ(va.size(), vb.size());
  for (size_t i = 0; i < va.size(); ++i) {
    EXPECT_EQ(va[i].name(), vb[i].name());
    expect_bitwise_equal(va[i].value(), vb[i].value(), va[i].name());
  }
}

// A custom layer with a weight: y = x * w (w per feature, starts at `init`).
class ScaledImpl : public LayerImpl {
 public:
  ScaledImpl(double init, std::string name) : LayerImpl("Scaled", std::move(name)), init_(init) {}
  void build(const Shape& s) override {
    w = add_weight("w", {s.dim(-1)}, initializers::constant(init_));
  }
  Tensor call(const Tensor& x, bool) override { return x * w.read(); }
  Json get_config() const override {
    Json c = LayerImpl::get_config();
    c["init"] = init_;
    return c;
  }
  Variable w;

 private:
  double init_;
};

inline Layer scaled_from_config(const Json& config) {
  ConfigReader c(config, "Scaled");
  return Layer(std::make_shared<ScaledImpl>(c.get<double>("init"), c.name()));
}

}  // namespace kiln::test

// The bf16 attention kernels (runtime/kernels/attention.cc: tiles of q, k, v and dout widened
// in each task's scratch, outputs attention_rounded once) give the op table's via-f32 values bit
// for bit: the float32 kernel on the widened operands, attention_rounded to bf16 (nearest even), at
// 1 and 2 threads. The problems take every path: several key blocks, causal skipping, a mask along
// the keys and one broadcast over them, one batch entry (the gradient split into groups whose
// partials are added) and many, d != dv. Fixed seeds.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "kiln/runtime/kernels.h"
#include "kiln/runtime/profiler.h"
#include "kiln/runtime/threading.h"

namespace kiln::runtime {
namespace {

struct Bf16AttentionCase {
  Shape q, k, v;
  bool causal = false;
  std::vector<int64_t> mask;  // empty: no mask
};

std::string describe_bf16_attention(const Bf16AttentionCase& c) {
  return "q " + c.q.to_string() + " k " + c.k.to_string() + " v " + c.v.to_string() +
         (c.causal ? " causal" : "") + (c.mask.empty() ? "" : " mask " + Shape(c.mask).to_string());
}

// A bf16 array of values in [-2, 2] and its float32 widening.
std::pair<Array, Array> attention_bf16_and_wide(const Shape& s, std::mt19937_64& rng) {
  Array b = Array::empty(DType::bf16, s), f = Array::empty(DType::f32, s);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int64_t i = 0; i < s.num_elements(); ++i) {
    b.data<bfloat16>()[i] = bfloat16::from_double(u(rng));
    f.data<float>()[i] = b.data<bfloat16>()[i].to_float();
  }
  return {b, f};
}

std::vector<uint16_t> attention_bf16_bits(const Array& a) {
  std::vector<uint16_t> v(size_t(a.size()));
  std::memcpy(v.data(), a.raw(), a.nbytes());
  return v;
}

std::vector<uint16_t> attention_rounded(const Array& f) {
  std::vector<uint16_t> v(size_t(f.size()));
  for (int64_t i = 0; i < f.size(); ++i)
    v[size_t(i)] = bfloat16::from_float(f.data<float>()[i]).bits;
  return v;
}

TEST(AttentionBf16, TheFloat32KernelsBitsRoundedOnce) {
  const int threads = num_threads();
  const std::vector<Bf16AttentionCase> cases = {
      {Shape{2, 3, 40, 16}, Shape{2, 3, 40, 16}, Shape{2, 3, 40, 16}, false, {}},
      {Shape{1, 200, 32},
       Shape{1, 300, 32},
       Shape{1, 300, 24},
       false,
       {}},                                                              // 3 key blocks, d != dv
      {Shape{4, 70, 16}, Shape{4, 70, 16}, Shape{4, 70, 16}, true, {}},  // causal skipping
      {Shape{2, 50, 8}, Shape{2, 150, 8}, Shape{2, 150, 8}, false, {2, 1, 150}},  // key mask
      {Shape{3, 20, 8}, Shape{3, 30, 8}, Shape{3, 30, 8}, true, {3, 20, 1}},      // broadcast keys
      {Shape{16, 4, 64, 32}, Shape{16, 4, 64, 32}, Shape{16, 4, 64, 32}, true, {}},  // kiln bench's
  };
  uint64_t seed = 5100;
  for (const Bf16AttentionCase& c : cases) {
    SCOPED_TRACE(describe_bf16_attention(c));
    std::mt19937_64 rng(seed++);
    auto [q, qf] = attention_bf16_and_wide(c.q, rng);
    auto [k, kf] = attention_bf16_and_wide(c.k, rng);
    auto [v, vf] = attention_bf16_and_wide(c.v, rng);
    std::vector<int64_t> out_dims = c.q.to_vector();
    out_dims.back() = c.v.dim(-1);
    const Shape out_shape(out_dims);
    auto [dout, doutf] = attention_bf16_and_wide(out_shape, rng);
    std::vector<Array> fwd = {q, k, v}, fwd_f32 = {qf, kf, vf};
    std::vector<Array> grad = {q, k, v, dout}, grad_f32 = {qf, kf, vf, doutf};
    if (!c.mask.empty()) {
      Array mask = Array::empty(DType::b8, Shape(c.mask));
      for (int64_t i = 0; i < mask.size(); ++i) mask.data<bool>()[i] = rng() % 4 != 0;
      for (auto* list : {&fwd, &fwd_f32, &grad, &grad_f32}) list->push_back(mask);
    }
    const Attrs attrs{{"scale", 0.25}, {"causal", c.causal}};
    for (auto [op, bf16_in, f32_in] : {std::tuple{OpKind::Attention, &fwd, &fwd_f32},
                                       std::tuple{OpKind::AttentionGrad, &grad, &grad_f32}}) {
      const std::vector<uint16_t> want = attention_rounded(run_op(op, *f32_in, attrs));
      for (int t : {1, 2}) {
        set_num_threads(t);
        const Array got = run_op(op, *bf16_in, attrs);
        ASSERT_EQ(got.dtype, DType::bf16);
        EXPECT_EQ(attention_bf16_bits(got), want) << op_name(op) << " at " << t << " threads";
      }
    }
  }
  set_num_threads(threads);
}

// The kernels read bf16 themselves: no `bf16 widen` / `bf16 round` events (the via-f32 rule's
// passes over whole operands).
TEST(AttentionBf16, NoPassOverMemoryWidensTheOperands) {
  std::mt19937_64 rng(5200);
  const Shape s{2, 4, 64, 32};
  auto [q, qf] = attention_bf16_and_wide(s, rng);
  auto [k, kf] = attention_bf16_and_wide(s, rng);
  auto [v, vf] = attention_bf16_and_wide(s, rng);
  auto [dout, doutf] = attention_bf16_and_wide(s, rng);
  const Attrs attrs{{"scale", 0.125}, {"causal", true}};
  start_profiling();
  const Array fwd[] = {q, k, v}, grad[] = {q, k, v, dout};
  run_op(OpKind::Attention, fwd, attrs);
  run_op(OpKind::AttentionGrad, grad, attrs);
  int products = 0;
  for (const ProfileEvent& e : stop_profiling()) {
    EXPECT_NE(e.category, "bf16") << e.name;
    products += e.category == "gemm";
  }
  EXPECT_GT(products, 0);
}

}  // namespace
}  // namespace kiln::runtime

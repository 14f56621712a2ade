// A reshape stored by a kernel (codegen/lower_kernel.cc, emit_reshape_walk): the loop walks the
// reshape's input shape and stores at the same row-major offset, instead of walking the output
// and dividing its index into the input's per element. A conv epilogue's flatten (bias, ReLU,
// [batch, h, w, c] -> [batch, h*w*c]) with the conv output also stored, a split of the row
// ([batch, 12] -> [batch, 3, 4]), size-1 dimensions and a flatten's gradient (a flat input read
// at a 4-D index): bitwise the reference executor at 1, 2 and 3 threads, and the flatten and
// its gradient (also through a ReLU, in a kernel with a broadcast bias) are vector code without
// divisions or gathers (lower_kernel.cc reads a reshape of a buffer at its own offset).
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "kiln/codegen/jit.h"
#include "kiln/codegen/lower_kernel.h"
#include "kiln/runtime/threading.h"
#include "tests/codegen/codegen_test_util.h"

namespace kiln {
namespace {

using runtime::Array;

constexpr const char* kFlatten =
    R"(graph @f(%0: f32[6,5,7,32], %1: f32[32]) -> (f32[6,5,7,32], f32[6,1120]) {
  %2 = add(%0, %1) : f32[6,5,7,32]
  %3 = relu(%2) : f32[6,5,7,32]
  %4 = reshape(%3) {shape=[6, 1120]} : f32[6,1120]
  return %2, %4
})";

constexpr const char* kSplit =
    R"(graph @f(%0: f32[9,12], %1: f32[12]) -> (f32[9,3,4], f32[9,1,12,1]) {
  %2 = mul(%0, %1) : f32[9,12]
  %3 = reshape(%2) {shape=[9, 3, 4]} : f32[9,3,4]
  %4 = neg(%0) : f32[9,12]
  %5 = reshape(%4) {shape=[9, 1, 12, 1]} : f32[9,1,12,1]
  return %3, %5
})";

// A flatten's gradient: the flat input read at a 4-D index (codegen/operand_index.cc divides
// the index's linear offset; LLVM folds the division of a row's offset by the row length).
constexpr const char* kUnflatten =
    R"(graph @f(%0: f32[6,1120], %1: f32[6,5,7,32]) -> (f32[6,5,7,32]) {
  %2 = reshape(%0) {shape=[6, 5, 7, 32]} : f32[6,5,7,32]
  %3 = mul(%2, %1) : f32[6,5,7,32]
  return %3
})";

// The same read in a kernel that is not flat (the bias broadcasts): the CNN's dense-layer input
// gradient through the flatten and the ReLU. The reshape's index used to keep a 64-bit remainder
// by the element count per element (the kernel ran scalar, 240 us of the CNN's step).
constexpr const char* kUnflattenReluGradient =
    R"(graph @f(%0: f32[6,1120], %1: f32[6,5,7,32], %2: f32[32]) -> (f32[6,5,7,32]) {
  %3 = add(%1, %2) : f32[6,5,7,32]
  %4 = relu(%3) : f32[6,5,7,32]
  %5 = reshape(%0) {shape=[6, 5, 7, 32]} : f32[6,5,7,32]
  %6 = constant dense<0.0> : f32[]
  %7 = greater(%4, %6) : bool[6,5,7,32]
  %8 = select(%7, %5, %6) : f32[6,5,7,32]
  return %8
})";

TEST(ReshapeWalk, StoredReshapesEqualTheReferenceBitwise) {
  for (const char* text : {kFlatten, kSplit, kUnflatten, kUnflattenReluGradient}) {
    testing::ScopedCacheDir cache;
    auto g = testing::optimized_graph(text);
    std::mt19937 rng(11);
    std::vector<Array> args;
    for (const auto& p : g->parameters()) args.push_back(testing::random_array(p->type(), rng));
    args[0].data<float>()[0] = -0.0f;  // relu(-0.0 + bias) and neg keep their bits
    testing::expect_bitwise_at_thread_counts(*g, args, text);
  }
}

TEST(ReshapeWalk, FlattensAndTheirGradientsAreVectorCodeWithoutDivisions) {
  for (const char* text : {kFlatten, kUnflatten, kUnflattenReluGradient}) {
    auto g = ir::parse_graph(text, "test");
    codegen::LoweredKernel k = codegen::lower_kernel(*g, "k");
    codegen::optimize_module(k.module);
    const std::string opt = codegen::module_text(*k.module.module);
    EXPECT_EQ(opt.find("udiv"), std::string::npos) << opt;
    EXPECT_EQ(opt.find("urem"), std::string::npos) << opt;
    // A reshape of a buffer is read at its own row-major offset: contiguous vectors, not
    // gathers (the remainders' freeze hid the offset from the vectorizer).
    EXPECT_EQ(opt.find("gather"), std::string::npos) << opt;
    EXPECT_EQ(opt.find("freeze"), std::string::npos) << opt;
    // the bias add / the product is vectorized ("fadd contract <16 x float>" with AVX-512)
    EXPECT_TRUE(std::regex_search(opt, std::regex("f(add|mul)[a-z ]* <[0-9]+ x float>")) ||
                std::regex_search(opt, std::regex("select[a-z ]* <[0-9]+ x i1>")))
        << opt;
  }
}

}  // namespace
}  // namespace kiln

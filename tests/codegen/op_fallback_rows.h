// The op consistency suite's rows of the ops codegen does not lower: compile_graph runs their
// eager kernels (tests/codegen/op_consistency_test.cc compares them with the reference executor,
// tests/ops/op_row_completeness_test.cc checks every such op has one). Included through
// tests/codegen/op_consistency_rows.h.
#pragma once

namespace kiln {
namespace {

struct FallbackRow {
  const char* name;
  const char* ir;
};

const FallbackRow kFallbackRows[] = {
    {"gather", R"(graph @f(%0: f32[5,3], %1: i32[4]) -> (f32[4,3]) {
  %2 = gather(%0, %1) {axis=0} : f32[4,3]
  return %2
})"},
    {"avg_pool2d", R"(graph @f(%0: f32[1,5,5,2]) -> (f32[1,5,5,2]) {
  %1 = avg_pool2d(%0) {pool_size=[3, 3], strides=[1, 1], padding="same"} : f32[1,5,5,2]
  return %1
})"},
    {"conv2d", R"(graph @f(%0: f32[1,5,5,2], %1: f32[3,3,2,4]) -> (f32[1,5,5,4]) {
  %2 = conv2d(%0, %1) {strides=[1, 1], dilations=[1, 1], padding="same"} : f32[1,5,5,4]
  return %2
})"},
    {"pad", R"(graph @f(%0: f32[2,3]) -> (f32[5,6]) {
  %1 = pad(%0) {low=[1, 0], high=[1, 1], interior=[1, 1]} : f32[5,6]
  return %1
})"},
    {"scatter_add", R"(graph @f(%0: f32[4,3], %1: i32[4]) -> (f32[5,3]) {
  %2 = scatter_add(%0, %1) {axis=0, dim_size=5} : f32[5,3]
  return %2
})"},
    {"random_uniform", R"(graph @f(%0: i64[]) -> (f32[17]) {
  %1 = random_uniform(%0) {shape=[17], dtype=f32, minval=-1.0, maxval=1.0} : f32[17]
  return %1
})"},
    {"random_normal", R"(graph @f(%0: i64[]) -> (f64[3,5]) {
  %1 = random_normal(%0) {shape=[3, 5], dtype=f64, mean=0.0, stddev=2.0} : f64[3,5]
  return %1
})"},
    {"conv2d_backprop_input", R"(graph @f(%0: f32[3,3,2,4], %1: f32[1,5,5,4]) -> (f32[1,5,5,2]) {
  %2 = conv2d_backprop_input(%0, %1) {input_shape=[1, 5, 5, 2], strides=[1, 1], dilations=[1, 1], padding="same"} : f32[1,5,5,2]
  return %2
})"},
    {"conv2d_backprop_filter", R"(graph @f(%0: f32[1,5,5,2], %1: f32[1,5,5,4]) -> (f32[3,3,2,4]) {
  %2 = conv2d_backprop_filter(%0, %1) {filter_shape=[3, 3, 2, 4], strides=[1, 1], dilations=[1, 1], padding="same"} : f32[3,3,2,4]
  return %2
})"},
    {"avg_pool2d_grad", R"(graph @f(%0: f32[1,2,2,2]) -> (f32[1,4,4,2]) {
  %1 = avg_pool2d_grad(%0) {input_shape=[1, 4, 4, 2], pool_size=[2, 2], strides=[2, 2], padding="valid"} : f32[1,4,4,2]
  return %1
})"},
    {"random_int", R"(graph @f(%0: i64[]) -> (i32[9]) {
  %1 = random_int(%0) {shape=[9], dtype=i32, minval=-5, maxval=5} : i32[9]
  return %1
})"},
    {"attention",
     R"(graph @f(%0: f32[2,5,3], %1: f32[2,7,3], %2: f32[2,7,4], %3: bool[2,1,7]) -> (f32[2,5,4]) {
  %4 = attention(%0, %1, %2, %3) {scale=0.5, causal=true} : f32[2,5,4]
  return %4
})"},
    {"attention_grad",
     R"(graph @f(%0: f64[3,6,2], %1: f64[3,4,2], %2: f64[3,4,3], %3: f64[3,6,3]) -> (f64[3,14,3]) {
  %4 = attention_grad(%0, %1, %2, %3) {scale=0.75, causal=false} : f64[3,14,3]
  return %4
})"},
    // (one process: the sum over one rank; tests/distributed/ runs it across ranks)
    {"all_reduce", R"(graph @f(%0: f32[7,3]) -> (f32[7,3]) {
  %1 = all_reduce(%0) : f32[7,3]
  return %1
})"},
    {"matmul", R"(graph @f(%0: f32[5,3], %1: f32[4,3]) -> (f32[5,4]) {
  %2 = matmul(%0, %1) {transpose_a=false, transpose_b=true} : f32[5,4]
  return %2
})"},
};

}  // namespace
}  // namespace kiln

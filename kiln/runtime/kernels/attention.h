// The fused attention kernels' blocking (runtime/kernels/attention.cc) and its measurement.
//
// A task of the attention kernels owns a block of query rows of one batch entry. Causal
// attention wants smaller blocks than plain attention (a block of rows [r0, r0 + rows) needs
// only the keys before r0 + rows, so smaller blocks compute less of the masked triangle), while
// every block pays its products' per-call costs: the best sizes depend on the machine. They come
// from the float32 kernel set's tuned table (`kiln tune` measures them: tune_attention_blocks),
// else from AttentionBlocks' defaults, measured on Zen 3 and Zen 5.
//
// Every block size of gemm_detail::kAttentionQueryBlocks gives the same bits for finite
// operands: a row's scores, exponentials and sums do not depend on which other rows share its
// block (keys a block visits beyond a row's own causal range weigh exactly +0 in it), the
// gradient's dk and dv run one FMA chain over the query rows of each group of 64 rows (a
// multiple of every block), and the groups are added in order (attention.cc). That rests on
// kiln's GEMM engine, whose every element is one FMA chain whatever the product's size: where
// the products run on Eigen's GEMM instead (float64, or KILN_GEMM=eigen), whose sums depend on
// the sizes, the kernels always take the default blocks.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <string>

#include "kiln/ir/attrs.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/gemm_tuner.h"

namespace kiln::runtime {

// Query rows per block without and with causality, each one of kAttentionQueryBlocks. The
// defaults: without causality 64 rows were fastest on every CPU measured; causal blocks on the
// `kiln bench` transformer's heads [4, 16, 64, 32] (bench/attention_bench.cc): Zen 3, one
// thread, forward / gradient 677 / 1576 us with 64 rows, 599 / 1349 with 32, 574 / 1189 with 16;
// Zen 5, two threads, 32 rows against 16: forward 151-170 against 154-195 us, gradient 306-357
// against 338-416 us.
struct AttentionBlocks {
  int64_t query = 64, causal = 32;
  bool operator==(const AttentionBlocks&) const = default;
};

// The blocks in use: the tuned table's (gemm_detail::tuned_attention of the float32 kernels in
// use), else the defaults.
AttentionBlocks attention_blocks();

// The attention and attention_grad kernels (inputs, attributes and output as the op table's
// kernels take them) with the given blocks, or the defaults where the products run on Eigen's
// GEMM (above): the tuner's measurements and the tests. kiln::Error for a block that is not a
// divisor of 64 rows.
void attention_with_blocks(std::span<const Array> in, const Attrs& attrs, Array& out,
                           const AttentionBlocks& blocks);
void attention_grad_with_blocks(std::span<const Array> in, const Attrs& attrs, Array& out,
                                const AttentionBlocks& blocks);

// What tune_attention_blocks measured: the blocks it started from (the defaults) and chose,
// the gain of each choice (plain and causal: the start's time over the choice's, each shape's
// time taken relative to its time under the start, so that every shape weighs the same), and
// the candidates it timed.
struct AttentionTuneReport {
  AttentionBlocks start, chosen;
  double plain_gain = 1.0, causal_gain = 1.0;
  int candidates = 0;
  // Every block's time over the default's, "16 rows 1.08, 32 rows 0.97, 64 rows 1.00".
  std::string plain_times, causal_times;
  double gain() const { return std::sqrt(plain_gain * causal_gain); }
  gemm_detail::TunedAttention tuned() const {
    return gemm_detail::TunedAttention{chosen.query, chosen.causal, gain()};
  }
};

// Times the attention forward and gradient kernels on one thread, on the `kiln bench`
// transformer's heads [4, 16, 64, 32] and on [2, 4, 512, 64] (float32), the causal block on
// causal attention and the plain block without it, each of kAttentionQueryBlocks against the
// current choice interleaved (the shapes' times relative to their first under the defaults)
// (o.rounds, o.slice_seconds, o.min_gain as gemm_detail::tune_gemm takes them; o.shapes and o.start
// are not used). Changes nothing in use.
AttentionTuneReport tune_attention_blocks(const gemm_detail::TuneOptions& o);

}  // namespace kiln::runtime

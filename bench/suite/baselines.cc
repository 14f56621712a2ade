// Hand-written baselines (see bench/suite/baselines.h): Eigen + oneTBB only, no kiln.
#include "bench/suite/baselines.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/partitioner.h>
#include <tbb/task_arena.h>

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

namespace kiln::bench {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Stride = Eigen::OuterStride<>;
using ConstMap = Eigen::Map<const RowMat, 0, Stride>;
using MutMap = Eigen::Map<RowMat, 0, Stride>;
using ArrayMap = Eigen::Map<Eigen::ArrayXf>;
using ConstArrayMap = Eigen::Map<const Eigen::ArrayXf>;

constexpr int64_t kParallelMinFlops = int64_t{1} << 20;
constexpr int64_t kElementGrain = 16384;  // elementwise work below this stays on one thread
constexpr int64_t kAdamBlock = 2048;      // Adam's one pass: m, v, w per block, block in L1

}  // namespace

struct Pool::Arena {
  tbb::task_arena arena;
  explicit Arena(int threads) : arena(threads) {}
};

Pool::Pool(int threads)
    : threads_(std::max(threads, 1)), arena_(std::make_unique<Arena>(threads_)) {}
Pool::~Pool() = default;

void Pool::tasks(int64_t count, const std::function<void(int64_t)>& fn) {
  if (count <= 0) return;
  if (count == 1 || threads_ == 1) {
    for (int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
  arena_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, count, 1),
        [&](const tbb::blocked_range<int64_t>& r) {
          for (int64_t i = r.begin(); i != r.end(); ++i) fn(i);
        },
        tbb::simple_partitioner());
  });
}

void Pool::chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t count = n < grain ? 1 : std::min<int64_t>(threads_, n);
  const int64_t step = (n + count - 1) / count;
  tasks(count, [&](int64_t i) {
    const int64_t begin = i * step, end = std::min(n, begin + step);
    if (begin < end) fn(begin, end);
  });
}

void gemm(Pool& pool, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a,
          const float* b, float* c, const Epilogue& epilogue) {
  // One slab: C[r0:r1, c0:c1] = op(A)[r0:r1, :] op(B)[:, c0:c1], one single-threaded product.
  auto slab = [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    MutMap out(c + r0 * n + c0, r1 - r0, c1 - c0, Stride(n));
    auto times_b = [&](const auto& lhs) {
      if (!trans_b) {
        out.noalias() = lhs * ConstMap(b + c0, k, c1 - c0, Stride(n));
      } else {
        out.noalias() = lhs * ConstMap(b + c0 * k, c1 - c0, k, Stride(k)).transpose();
      }
    };
    if (!trans_a) {
      times_b(ConstMap(a + r0 * k, r1 - r0, k, Stride(k)));
    } else {
      times_b(ConstMap(a + r0, k, r1 - r0, Stride(m)).transpose());
    }
    if (epilogue) epilogue(r0, r1, c0, c1);
  };
  if (m == 0 || n == 0) return;
  const int64_t flops = 2 * m * n * k;
  const int64_t slabs =
      flops < kParallelMinFlops ? 1 : std::min<int64_t>(pool.threads(), m > n ? m : n);
  const bool by_rows = m >= n;
  const int64_t extent = by_rows ? m : n, step = (extent + slabs - 1) / slabs;
  pool.tasks(slabs, [&](int64_t i) {
    const int64_t lo = i * step, hi = std::min(extent, lo + step);
    if (lo >= hi) return;
    if (by_rows) {
      slab(lo, hi, 0, n);
    } else {
      slab(0, m, lo, hi);
    }
  });
}

GemmOnly::GemmOnly(Pool& pool, std::vector<GemmShape> shapes)
    : pool_(pool), shapes_(std::move(shapes)) {
  for (const GemmShape& s : shapes_) {
    a_.emplace_back(size_t(s.batch * s.m * s.k), 0.01f);
    b_.emplace_back(size_t(s.batch * s.k * s.n), 0.02f);
    c_.emplace_back(size_t(s.batch * s.m * s.n), 0.0f);
  }
}

void GemmOnly::run() {
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const GemmShape& s = shapes_[i];
    auto one = [&](int64_t j) {
      gemm(pool_, s.trans_a, s.trans_b, s.m, s.n, s.k, a_[i].data() + j * s.m * s.k,
           b_[i].data() + j * s.k * s.n, c_[i].data() + j * s.m * s.n);
    };
    for (int64_t r = 0; r < s.repeat; ++r) {
      if (s.batch == 1) {
        one(0);
      } else {
        pool_.tasks(s.batch, one);
      }
    }
  }
}

double GemmOnly::flops() const {
  double f = 0;
  for (const GemmShape& s : shapes_)
    f += 2.0 * double(s.m) * double(s.n) * double(s.k) * double(s.batch * s.repeat);
  return f;
}

std::vector<GemmShape> mlp_step_gemms(const std::vector<int64_t>& dims, int64_t batch) {
  std::vector<GemmShape> shapes;
  for (size_t l = 1; l < dims.size(); ++l) {
    const int64_t in = dims[l - 1], out = dims[l];
    shapes.push_back({batch, out, in});                          // forward: x W
    shapes.push_back({in, out, batch, true, false});             // dW = x^T dz
    if (l > 1) shapes.push_back({batch, in, out, false, true});  // dx = dz W^T
  }
  return shapes;
}

void adam_update(Pool& pool, AdamState& s, float* w, const float* g, float* m, float* v,
                 int64_t n) {
  const double t = double(s.iterations + 1);
  const auto alpha =
      float(s.lr * std::sqrt(1.0 - std::pow(s.beta_2, t)) / (1.0 - std::pow(s.beta_1, t)));
  const auto one_minus_b1 = float(1.0 - s.beta_1), one_minus_b2 = float(1.0 - s.beta_2);
  const auto eps = float(s.epsilon);
  pool.chunks(n, kElementGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; i += kAdamBlock) {
      const int64_t len = std::min(kAdamBlock, end - i);
      ConstArrayMap G(g + i, len);
      ArrayMap M(m + i, len), V(v + i, len), W(w + i, len);
      M += (G - M) * one_minus_b1;
      V += (G.square() - V) * one_minus_b2;
      W -= (M * alpha) / (V.sqrt() + eps);
    }
  });
}

float softmax_cross_entropy(Pool& pool, const float* logits, const int64_t* labels, float* grad,
                            int64_t rows, int64_t cols) {
  std::vector<float> row_loss(size_t(rows), 0.f);
  const float inv_rows = 1.f / float(rows);
  pool.chunks(rows, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(cols, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  ConstArrayMap x(logits + i * cols, cols);
                  ArrayMap gr(grad + i * cols, cols);
                  const float mx = x.maxCoeff();
                  gr = (x - mx).exp();
                  const float sum = gr.sum();
                  const int64_t label = labels[i];
                  row_loss[size_t(i)] = std::log(sum) + mx - x[label];
                  gr *= inv_rows / sum;
                  gr[label] -= inv_rows;
                }
              });
  float total = 0;
  for (float l : row_loss) total += l;
  return total * inv_rows;
}

void layer_norm_gelu_residual(Pool& pool, const float* x, const float* r, const float* gamma,
                              const float* beta, float* y, int64_t rows, int64_t cols) {
  const float kSqrt2OverPi = 0.7978845608028654f;
  ConstArrayMap G(gamma, cols), B(beta, cols);
  pool.chunks(rows, std::max<int64_t>(1, kElementGrain / std::max<int64_t>(cols, 1)),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  ConstArrayMap X(x + i * cols, cols), R(r + i * cols, cols);
                  ArrayMap Y(y + i * cols, cols);
                  const float mu = X.mean();
                  const float var = (X - mu).square().mean();
                  const float rstd = 1.f / std::sqrt(var + 1e-5f);
                  Y = (X - mu) * rstd * G + B;
                  Y = 0.5f * Y * (1.f + (kSqrt2OverPi * (Y + 0.044715f * Y.cube())).tanh()) + R;
                }
              });
}

MlpStep::MlpStep(Pool& pool, std::vector<int64_t> dims, int64_t batch, uint64_t seed)
    : pool_(pool), dims_(std::move(dims)), batch_(batch) {
  std::mt19937_64 rng(seed);
  const size_t layers = dims_.size() - 1;
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    const auto limit = float(std::sqrt(6.0 / double(in + out)));
    std::uniform_real_distribution<float> dist(-limit, limit);
    std::vector<float> w(size_t(in * out));
    for (float& e : w) e = dist(rng);
    w_.push_back(std::move(w));
    b_.emplace_back(size_t(out), 0.f);
    dw_.emplace_back(size_t(in * out));
    db_.emplace_back(size_t(out));
    mw_.emplace_back(size_t(in * out), 0.f);
    vw_.emplace_back(size_t(in * out), 0.f);
    mb_.emplace_back(size_t(out), 0.f);
    vb_.emplace_back(size_t(out), 0.f);
    a_.emplace_back(size_t(batch * out));
    dz_.emplace_back(size_t(batch * out));
  }
}

float MlpStep::run(const float* x, const int64_t* labels) {
  const size_t layers = dims_.size() - 1;
  // Forward: a[l] = relu(a[l-1] W + b) (no ReLU on the logits), bias + ReLU fused per slab.
  for (size_t l = 0; l < layers; ++l) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    const float* input = l == 0 ? x : a_[l - 1].data();
    float* act = a_[l].data();
    const float* bias = b_[l].data();
    const bool relu = l + 1 < layers;
    gemm(pool_, false, false, batch_, out, in, input, w_[l].data(), act,
         [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
           for (int64_t i = r0; i < r1; ++i) {
             float* row = act + i * out;
             for (int64_t j = c0; j < c1; ++j) {
               const float z = row[j] + bias[j];
               row[j] = relu ? std::max(z, 0.f) : z;
             }
           }
         });
  }
  const int64_t classes = dims_.back();
  const float loss = softmax_cross_entropy(pool_, a_[layers - 1].data(), labels,
                                           dz_[layers - 1].data(), batch_, classes);
  // Backward: dW = a^T dz, db = column sums of dz, dz[l-1] = (dz W^T) * (a[l-1] > 0).
  for (size_t l = layers; l-- > 0;) {
    const int64_t in = dims_[l], out = dims_[l + 1];
    const float* input = l == 0 ? x : a_[l - 1].data();
    gemm(pool_, true, false, in, out, batch_, input, dz_[l].data(), dw_[l].data());
    Eigen::Map<Eigen::RowVectorXf>(db_[l].data(), out) =
        Eigen::Map<const RowMat>(dz_[l].data(), batch_, out).colwise().sum();
    if (l > 0) {
      float* dprev = dz_[l - 1].data();
      const float* aprev = a_[l - 1].data();
      gemm(pool_, false, true, batch_, in, out, dz_[l].data(), w_[l].data(), dprev,
           [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
             for (int64_t i = r0; i < r1; ++i)
               for (int64_t j = c0; j < c1; ++j)
                 if (aprev[i * in + j] <= 0.f) dprev[i * in + j] = 0.f;
           });
    }
  }
  for (size_t l = 0; l < layers; ++l) {
    adam_update(pool_, adam_, w_[l].data(), dw_[l].data(), mw_[l].data(), vw_[l].data(),
                int64_t(w_[l].size()));
    adam_update(pool_, adam_, b_[l].data(), db_[l].data(), mb_[l].data(), vb_[l].data(),
                int64_t(b_[l].size()));
  }
  ++adam_.iterations;
  return loss;
}

}  // namespace kiln::bench

namespace kiln::bench {
namespace {

constexpr int64_t kSide = 28, kHalf = 14, kC1 = 16, kC2 = 32, kClasses = 10;

// cols[(b, h, w), (kh, kw, c)] = in[b, h + kh - 1, w + kw - 1, c] (zero outside): 3x3, same.
void im2col(Pool& pool, const float* in, int64_t batch, int64_t side, int64_t c, float* cols) {
  pool.chunks(batch, 2, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t h = 0; h < side; ++h)
        for (int64_t w = 0; w < side; ++w) {
          float* row = cols + ((b * side + h) * side + w) * 9 * c;
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = h + kh - 1, iw = w + kw - 1;
              float* dst = row + (kh * 3 + kw) * c;
              if (ih < 0 || ih >= side || iw < 0 || iw >= side) {
                std::fill(dst, dst + c, 0.f);
              } else {
                std::copy_n(in + ((b * side + ih) * side + iw) * c, c, dst);
              }
            }
        }
  });
}

// The adjoint of im2col: in[b, h + kh - 1, w + kw - 1, c] += cols[(b, h, w), (kh, kw, c)].
void col2im(Pool& pool, const float* cols, int64_t batch, int64_t side, int64_t c, float* in) {
  pool.chunks(batch, 2, [&](int64_t b0, int64_t b1) {
    std::fill(in + b0 * side * side * c, in + b1 * side * side * c, 0.f);
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t h = 0; h < side; ++h)
        for (int64_t w = 0; w < side; ++w) {
          const float* row = cols + ((b * side + h) * side + w) * 9 * c;
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t ih = h + kh - 1, iw = w + kw - 1;
              if (ih < 0 || ih >= side || iw < 0 || iw >= side) continue;
              float* dst = in + ((b * side + ih) * side + iw) * c;
              const float* src = row + (kh * 3 + kw) * c;
              for (int64_t k = 0; k < c; ++k) dst[k] += src[k];
            }
        }
  });
}

// Epilogue: row-major [.., n] slab += bias, then ReLU if asked.
Epilogue bias_relu(float* out, const float* bias, int64_t n, bool relu) {
  return [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    for (int64_t i = r0; i < r1; ++i)
      for (int64_t j = c0; j < c1; ++j) {
        const float z = out[i * n + j] + bias[j];
        out[i * n + j] = relu ? std::max(z, 0.f) : z;
      }
  };
}

void column_sums(const float* x, int64_t rows, int64_t cols, float* out) {
  Eigen::Map<Eigen::RowVectorXf>(out, cols) =
      Eigen::Map<const RowMat>(x, rows, cols).colwise().sum();
}

}  // namespace

CnnStep::CnnStep(Pool& pool, int64_t batch, uint64_t seed) : pool_(pool), batch_(batch) {
  std::mt19937_64 rng(seed);
  const int64_t fan[3][2] = {{9, 9 * kC1}, {9 * kC1, 9 * kC2}, {kHalf * kHalf * kC2, kClasses}};
  const int64_t shape[3][2] = {{9, kC1}, {9 * kC1, kC2}, {kHalf * kHalf * kC2, kClasses}};
  for (int l = 0; l < 3; ++l) {
    const auto limit = float(std::sqrt(6.0 / double(fan[l][0] + fan[l][1])));
    std::uniform_real_distribution<float> dist(-limit, limit);
    std::vector<float> w(size_t(shape[l][0] * shape[l][1]));
    for (float& e : w) e = dist(rng);
    p_.push_back(std::move(w));
    p_.emplace_back(size_t(shape[l][1]), 0.f);
  }
  for (const auto& p : p_) {
    g_.emplace_back(p.size());
    m_.emplace_back(p.size(), 0.f);
    v_.emplace_back(p.size(), 0.f);
  }
  const auto p1 = size_t(batch * kSide * kSide), p2 = size_t(batch * kHalf * kHalf);
  col1_.resize(p1 * 9), z1_.resize(p1 * kC1), dz1_.resize(p1 * kC1);
  pooled_.resize(p2 * kC1), dpooled_.resize(p2 * kC1), argmax_.resize(p2 * kC1);
  col2_.resize(p2 * 9 * kC1), dcol2_.resize(p2 * 9 * kC1), z2_.resize(p2 * kC2),
      dz2_.resize(p2 * kC2);
  logits_.resize(size_t(batch * kClasses)), dlogits_.resize(size_t(batch * kClasses));
}

float CnnStep::run(const float* x, const int64_t* labels) {
  const int64_t p1 = batch_ * kSide * kSide, p2 = batch_ * kHalf * kHalf,
                flat = kHalf * kHalf * kC2;
  // Forward.
  im2col(pool_, x, batch_, kSide, 1, col1_.data());
  gemm(pool_, false, false, p1, kC1, 9, col1_.data(), p_[0].data(), z1_.data(),
       bias_relu(z1_.data(), p_[1].data(), kC1, true));
  pool_.chunks(batch_, 2, [&](int64_t b0, int64_t b1) {  // 2x2 max-pool, argmax kept
    for (int64_t b = b0; b < b1; ++b)
      for (int64_t i = 0; i < kHalf; ++i)
        for (int64_t j = 0; j < kHalf; ++j)
          for (int64_t c = 0; c < kC1; ++c) {
            const int64_t o = ((b * kHalf + i) * kHalf + j) * kC1 + c;
            float best = 0;
            uint8_t arg = 0;
            for (uint8_t k = 0; k < 4; ++k) {
              const float v =
                  z1_[size_t(((b * kSide + 2 * i + k / 2) * kSide + 2 * j + k % 2) * kC1 + c)];
              if (k == 0 || v > best) best = v, arg = k;
            }
            pooled_[size_t(o)] = best, argmax_[size_t(o)] = arg;
          }
  });
  im2col(pool_, pooled_.data(), batch_, kHalf, kC1, col2_.data());
  gemm(pool_, false, false, p2, kC2, 9 * kC1, col2_.data(), p_[2].data(), z2_.data(),
       bias_relu(z2_.data(), p_[3].data(), kC2, true));
  gemm(pool_, false, false, batch_, kClasses, flat, z2_.data(), p_[4].data(), logits_.data(),
       bias_relu(logits_.data(), p_[5].data(), kClasses, false));
  const float loss =
      softmax_cross_entropy(pool_, logits_.data(), labels, dlogits_.data(), batch_, kClasses);
  // Backward: dense, ReLU, conv2, col2im, max-pool, ReLU, conv1 (no input gradient).
  gemm(pool_, true, false, flat, kClasses, batch_, z2_.data(), dlogits_.data(), g_[4].data());
  column_sums(dlogits_.data(), batch_, kClasses, g_[5].data());
  float* dz2 = dz2_.data();
  const float* z2 = z2_.data();
  gemm(pool_, false, true, batch_, flat, kClasses, dlogits_.data(), p_[4].data(), dz2,
       [=](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
         for (int64_t i = r0; i < r1; ++i)
           for (int64_t j = c0; j < c1; ++j)
             if (z2[i * flat + j] <= 0.f) dz2[i * flat + j] = 0.f;
       });
  gemm(pool_, true, false, 9 * kC1, kC2, p2, col2_.data(), dz2, g_[2].data());
  column_sums(dz2, p2, kC2, g_[3].data());
  gemm(pool_, false, true, p2, 9 * kC1, kC2, dz2, p_[2].data(), dcol2_.data());
  col2im(pool_, dcol2_.data(), batch_, kHalf, kC1, dpooled_.data());
  pool_.chunks(batch_, 2, [&](int64_t b0, int64_t b1) {  // max-pool + ReLU backward
    std::fill(dz1_.begin() + b0 * kSide * kSide * kC1, dz1_.begin() + b1 * kSide * kSide * kC1,
              0.f);
    for (int64_t o = b0 * kHalf * kHalf * kC1; o < b1 * kHalf * kHalf * kC1; ++o) {
      const int64_t c = o % kC1, j = (o / kC1) % kHalf, i = (o / (kC1 * kHalf)) % kHalf,
                    b = o / (kC1 * kHalf * kHalf), k = argmax_[size_t(o)];
      const int64_t in = ((b * kSide + 2 * i + k / 2) * kSide + 2 * j + k % 2) * kC1 + c;
      if (z1_[size_t(in)] > 0.f) dz1_[size_t(in)] = dpooled_[size_t(o)];
    }
  });
  gemm(pool_, true, false, 9, kC1, p1, col1_.data(), dz1_.data(), g_[0].data());
  column_sums(dz1_.data(), p1, kC1, g_[1].data());
  for (size_t i = 0; i < p_.size(); ++i)
    adam_update(pool_, adam_, p_[i].data(), g_[i].data(), m_[i].data(), v_[i].data(),
                int64_t(p_[i].size()));
  ++adam_.iterations;
  return loss;
}

}  // namespace kiln::bench

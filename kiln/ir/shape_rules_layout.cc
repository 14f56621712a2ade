// Shape/dtype rules of layout and data-movement ops: reshape, transpose, broadcast_to,
// concat, slice, pad, gather, scatter_add, one_hot, and the random ops.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "kiln/ir/shape_rules.h"

namespace kiln::rules {
namespace {

void require_rank_attr(const std::vector<int64_t>& v, int rank, const char* name, const Shape& s,
                       const char* op) {
  if (int(v.size()) != rank)
    throw Error(fmt::format("{}: {} has {} entries [{}], but the input {} has rank {}", op, name,
                            v.size(), fmt::join(v, ", "), s.to_string(), rank));
}

void require_int_indices(const TensorType& t, const char* op) {
  if (t.dtype != DType::i32 && t.dtype != DType::i64)
    throw Error(fmt::format("{}: indices must be int32 or int64, got {} {}", op,
                            dtype_name(t.dtype), t.shape.to_string()));
}

}  // namespace

TensorType rule_reshape(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const auto& want = attrs.get_ints("shape", op.name);
  const Shape& s = in[0].shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == -1) {
      if (infer >= 0)
        throw Error(
            fmt::format("reshape: target shape [{}] has more than one -1", fmt::join(want, ", ")));
      infer = int(i);
    } else if (want[i] < 0) {
      throw Error(fmt::format("reshape: target shape [{}] has a negative dimension",
                              fmt::join(want, ", ")));
    } else if (__builtin_mul_overflow(known, want[i], &known)) {
      throw Error(fmt::format("reshape: target shape [{}] has more elements than int64 can count",
                              fmt::join(want, ", ")));
    }
  }
  std::vector<int64_t> out = want;
  // Symbolic input with unknown dimensions: the -1 entry stays unknown; sizes cannot be checked.
  if (!s.is_fully_known()) return {in[0].dtype, Shape(out)};
  int64_t total = s.num_elements();
  if (infer >= 0) {
    if (known == 0 || total % known != 0)
      throw Error(
          fmt::format("reshape: cannot reshape a tensor of shape {} ({} elements) into "
                      "shape [{}]: {} is not a multiple of {}",
                      s.to_string(), total, fmt::join(want, ", "), total, known));
    out[infer] = total / known;
  } else if (known != total) {
    throw Error(
        fmt::format("reshape: cannot reshape a tensor of shape {} ({} elements) into "
                    "shape {} ({} elements)",
                    s.to_string(), total, Shape(want).to_string(), known));
  }
  return {in[0].dtype, Shape(out)};
}

TensorType rule_transpose(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const auto& perm = attrs.get_ints("perm", op.name);
  const Shape& s = in[0].shape;
  require_rank_attr(perm, s.rank(), "perm", s, op.name);
  std::vector<bool> seen(size_t(s.rank()), false);
  Shape out;
  for (int64_t p : perm) {
    if (p < 0 || p >= s.rank() || seen[size_t(p)])
      throw Error(fmt::format("transpose: perm [{}] is not a permutation of 0..{}",
                              fmt::join(perm, ", "), s.rank() - 1));
    seen[size_t(p)] = true;
    out.push_back(s[int(p)]);
  }
  return {in[0].dtype, out};
}

TensorType rule_broadcast_to(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  Shape target(attrs.get_ints("shape", op.name));
  if (!broadcastable_to(in[0].shape, target))
    throw Error(
        fmt::format("broadcast_to: cannot broadcast shape {} to {}: each dimension must "
                    "match or be 1",
                    in[0].shape.to_string(), target.to_string()));
  return {in[0].dtype, target};
}

TensorType rule_broadcast_like(const OpInfo&, std::span<const TensorType> in, const Attrs&) {
  if (!broadcastable_to(in[0].shape, in[1].shape))
    throw Error(
        fmt::format("broadcast_like: cannot broadcast shape {} to the shape {} of the second "
                    "input: each dimension must match or be 1",
                    in[0].shape.to_string(), in[1].shape.to_string()));
  return {in[0].dtype, in[1].shape};
}

TensorType rule_element_count(const OpInfo& op, std::span<const TensorType> in,
                              const Attrs& attrs) {
  reduction_axes(attrs.get_ints("axes", op.name), in[0].shape.rank(), op.name);
  DType dtype = attrs.get_dtype("dtype", op.name);
  if (!is_numeric(dtype))
    throw Error(fmt::format("element_count: dtype must be numeric, got {}", dtype_name(dtype)));
  return {dtype, Shape{}};
}

TensorType rule_concat(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const Shape& first = in[0].shape;
  if (first.rank() == 0)
    throw Error("concat: cannot concatenate scalars; use kiln::stack or reshape them to (1,)");
  int axis = normalize_axis(attrs.get_int("axis", op.name), first.rank(), op.name);
  Shape out = first;
  for (size_t i = 1; i < in.size(); ++i) {
    const Shape& s = in[i].shape;
    if (in[i].dtype != in[0].dtype)
      throw Error(fmt::format("concat: input {} has dtype {}, input 0 has {}", i,
                              dtype_name(in[i].dtype), dtype_name(in[0].dtype)));
    bool ok = s.rank() == first.rank();
    for (int d = 0; ok && d < s.rank(); ++d) ok = d == axis || s[d] == first[d];
    if (!ok)
      throw Error(
          fmt::format("concat: input {} has shape {}, which does not match input 0's "
                      "shape {} outside axis {}",
                      i, s.to_string(), first.to_string(), axis));
    out[axis] += s[axis];
  }
  return {in[0].dtype, out};
}

std::vector<SliceRange> slice_ranges(const Shape& s, const Attrs& attrs, const char* op) {
  const auto& start = attrs.get_ints("start", op);
  const auto& stop = attrs.get_ints("stop", op);
  const auto& step = attrs.get_ints("step", op);
  require_rank_attr(start, s.rank(), "start", s, op);
  require_rank_attr(stop, s.rank(), "stop", s, op);
  require_rank_attr(step, s.rank(), "step", s, op);
  std::vector<SliceRange> r;
  for (int i = 0; i < s.rank(); ++i) {
    if (step[i] <= 0)
      throw Error(
          fmt::format("{}: step along axis {} is {}; steps must be positive", op, i, step[i]));
    int64_t d = s[i];
    if (d == kUnknownDim) {  // a symbolic dimension: the slice's size is not known either
      r.push_back({0, step[i], kUnknownDim});
      continue;
    }
    auto clamp = [d](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + d : v, 0, d); };
    int64_t b = clamp(start[i]), e = clamp(stop[i]);
    int64_t n = e > b ? (e - b - 1) / step[i] + 1 : 0;  // no overflow for any step
    r.push_back({b, step[i], n});
  }
  return r;
}

TensorType rule_slice(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  Shape out;
  for (const SliceRange& r : slice_ranges(in[0].shape, attrs, op.name)) out.push_back(r.size);
  return {in[0].dtype, out};
}

TensorType rule_pad(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  const Shape& s = in[0].shape;
  const auto& low = attrs.get_ints("low", op.name);
  const auto& high = attrs.get_ints("high", op.name);
  const auto& interior = attrs.get_ints("interior", op.name);
  require_rank_attr(low, s.rank(), "low", s, op.name);
  require_rank_attr(high, s.rank(), "high", s, op.name);
  require_rank_attr(interior, s.rank(), "interior", s, op.name);
  Shape out;
  for (int i = 0; i < s.rank(); ++i) {
    if (low[i] < 0 || high[i] < 0 || interior[i] < 0)
      throw Error(fmt::format("pad: paddings must be >= 0, got low [{}], high [{}], interior [{}]",
                              fmt::join(low, ", "), fmt::join(high, ", "),
                              fmt::join(interior, ", ")));
    int64_t d = s[i], n = 0;
    if (d == kUnknownDim) {  // a symbolic dimension stays unknown
      out.push_back(kUnknownDim);
      continue;
    }
    if (__builtin_add_overflow(low[i], high[i], &n) || __builtin_add_overflow(n, d, &n) ||
        (d > 0 &&
         (__builtin_mul_overflow(d - 1, interior[i], &d) || __builtin_add_overflow(n, d, &n))))
      throw Error(fmt::format(
          "pad: padding {} by low [{}], high [{}], interior [{}] gives a "
          "dimension larger than int64 holds",
          s.to_string(), fmt::join(low, ", "), fmt::join(high, ", "), fmt::join(interior, ", ")));
    out.push_back(n);
  }
  return {in[0].dtype, out};
}

TensorType rule_gather(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  require_int_indices(in[1], op.name);
  const Shape &p = in[0].shape, &idx = in[1].shape;
  int axis = normalize_axis(attrs.get_int("axis", op.name), p.rank(), op.name);
  if (p.rank() - 1 + idx.rank() > kMaxRank)
    throw Error(
        fmt::format("gather: result of gathering {} indices from {} along axis {} would "
                    "have rank {} > {}",
                    idx.to_string(), p.to_string(), axis, p.rank() - 1 + idx.rank(), kMaxRank));
  Shape out;
  for (int i = 0; i < axis; ++i) out.push_back(p[i]);
  for (int64_t d : idx) out.push_back(d);
  for (int i = axis + 1; i < p.rank(); ++i) out.push_back(p[i]);
  return {in[0].dtype, out};
}

TensorType rule_scatter_add(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  require_int_indices(in[1], op.name);
  const Shape &u = in[0].shape, &idx = in[1].shape;
  int64_t axis = attrs.get_int("axis", op.name), dim = attrs.get_int("dim_size", op.name);
  int out_rank = u.rank() - idx.rank() + 1;
  if (axis < 0 || axis >= out_rank || dim < 0)
    throw Error(
        fmt::format("scatter_add: axis {} / dim_size {} invalid for updates {} and indices "
                    "{}",
                    axis, dim, u.to_string(), idx.to_string()));
  Shape out;
  for (int i = 0; i < axis; ++i) out.push_back(u[i]);
  out.push_back(dim);
  for (int i = int(axis) + idx.rank(); i < u.rank(); ++i) out.push_back(u[i]);
  for (int i = 0; i < idx.rank(); ++i)
    if (u[int(axis) + i] != idx[i])
      throw Error(fmt::format("scatter_add: updates {} do not match indices {} at axis {}",
                              u.to_string(), idx.to_string(), axis + i));
  return {in[0].dtype, out};
}

TensorType rule_one_hot(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  require_int_indices(in[0], op.name);
  int64_t depth = attrs.get_int("depth", op.name);
  if (depth < 0) throw Error(fmt::format("one_hot: depth must be >= 0, got {}", depth));
  Shape out = in[0].shape;
  out.push_back(depth);
  return {attrs.get_dtype("dtype", op.name), out};
}

// Inputs: the seed, and optionally a tensor whose shape the output takes (its values are not
// read), so that a graph traced with unknown dimensions draws as many numbers as its arguments
// have at run time. Without it the shape attribute must be fully known; with it, the attribute
// is the shape at trace time (-1 where unknown) and must agree with the tensor's known sizes.
TensorType rule_random(const OpInfo& op, std::span<const TensorType> in, const Attrs& attrs) {
  if (in.size() > 2)
    throw Error(fmt::format("{}: expected a seed and at most one shape source, got {} inputs",
                            op.name, in.size()));
  if (in[0].dtype != DType::i64 || in[0].shape.rank() != 0)
    throw Error(fmt::format("{}: the seed (input 0) must be an int64 scalar, got {} {}", op.name,
                            dtype_name(in[0].dtype), in[0].shape.to_string()));
  DType dt = attrs.get_dtype("dtype", op.name);
  const Shape declared(attrs.get_ints("shape", op.name));
  Shape out = declared;
  if (in.size() == 2) {
    const Shape& like = in[1].shape;
    bool agrees = like.rank() == declared.rank();
    for (int d = 0; agrees && d < declared.rank(); ++d)
      agrees = declared[d] == kUnknownDim || like[d] == kUnknownDim || declared[d] == like[d];
    if (!agrees)
      throw Error(
          fmt::format("{}: the shape attribute {} disagrees with the shape {} of the "
                      "shape source (input 1)",
                      op.name, declared.to_string(), like.to_string()));
    out = like;
  } else {
    for (int d = 0; d < declared.rank(); ++d)
      if (declared[d] < 0)
        throw Error(fmt::format(
            "{}: shape {} has an unknown or negative dimension; inside a kiln::function traced "
            "with unknown dimensions take the shape from a tensor ({}_like(t), or the op's "
            "second input)",
            op.name, declared.to_string(), op.name));
  }
  if (op.kind == OpKind::RandomInt) {
    if (!is_integer(dt))
      throw Error(fmt::format("random_int: dtype must be an integer type, got {}", dtype_name(dt)));
    if (attrs.get_int("minval", op.name) >= attrs.get_int("maxval", op.name))
      throw Error(fmt::format("random_int: minval {} must be less than maxval {}",
                              attrs.get_int("minval", op.name), attrs.get_int("maxval", op.name)));
    if (dt == DType::i32 && (attrs.get_int("minval", op.name) < INT32_MIN ||
                             attrs.get_int("maxval", op.name) - 1 > INT32_MAX))
      throw Error(fmt::format("random_int: range [{}, {}) does not fit int32",
                              attrs.get_int("minval", op.name), attrs.get_int("maxval", op.name)));
    if (dt == DType::u8 &&
        (attrs.get_int("minval", op.name) < 0 || attrs.get_int("maxval", op.name) > 256))
      throw Error(fmt::format("random_int: range [{}, {}) does not fit uint8",
                              attrs.get_int("minval", op.name), attrs.get_int("maxval", op.name)));
  } else if (!is_floating(dt)) {
    throw Error(
        fmt::format("{}: dtype must be a floating dtype (float32, float64 or bfloat16), got {}",
                    op.name, dtype_name(dt)));
  } else if (op.kind == OpKind::RandomUniform) {
    double lo = attrs.get_double("minval", op.name), hi = attrs.get_double("maxval", op.name);
    if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
      throw Error(
          fmt::format("random_uniform: minval {} must be finite and less than maxval {}", lo, hi));
  } else {
    double mean = attrs.get_double("mean", op.name), sd = attrs.get_double("stddev", op.name);
    if (!std::isfinite(mean) || !std::isfinite(sd) || sd < 0)
      throw Error(fmt::format("random_normal: mean {} must be finite and stddev {} finite and >= 0",
                              mean, sd));
  }
  return {dt, out};
}

bool concat_pieces_contiguous(const Shape& result, int64_t axis) {
  const int a = normalize_axis(axis, result.rank(), "concat");
  for (int d = 0; d < a; ++d)
    if (result[d] != 1) return false;
  return true;
}

}  // namespace kiln::rules

// The geometry of one 2-D convolution (TensorFlow semantics: input NHWC, filter HWIO, "same"
// padding puts the odd pixel after), shared by the im2col kernels (conv.cc) and the direct
// kernels of shallow windows (conv_shallow.cc).
#pragma once

#include <cstdint>

#include "kiln/ir/attrs.h"
#include "kiln/ir/shape.h"
#include "kiln/ir/shape_rules.h"

namespace kiln::runtime {

// The deepest window (kh * kw * c values) the direct kernels of conv_shallow.h take: a 3x3
// window over three channels is 27.
inline constexpr int64_t kShallowDepth = 32;

struct ConvGeom {
  int64_t n, h, w, c;  // input NHWC
  int64_t kh, kw, o;   // filter HWIO (I == c)
  int64_t oh, ow;      // output spatial size
  int64_t sh, sw, dh, dw, ph, pw;

  int64_t k() const { return kh * kw * c; }
  int64_t rows() const { return n * oh * ow; }
  // A 1x1 stride-1 convolution has no padding: the input is its own im2col matrix.
  bool pointwise() const { return kh == 1 && kw == 1 && sh == 1 && sw == 1; }
  // The forward pass and the filter gradient run as direct convolutions (conv_shallow.h).
  bool shallow() const { return !pointwise() && k() <= kShallowDepth; }
};

// Throws kiln::Error (naming `op`) for bad strides, dilations or padding.
inline ConvGeom conv_geom(const Shape& input, const Shape& filter, const Attrs& attrs,
                          const char* op) {
  const auto& st = attrs.get_ints("strides", op);
  const auto& dil = attrs.get_ints("dilations", op);
  const auto& padding = attrs.get_string("padding", op);
  rules::WindowDim hd = rules::window_dim(input[1], filter[0], st[0], dil[0], padding, op);
  rules::WindowDim wd = rules::window_dim(input[2], filter[1], st[1], dil[1], padding, op);
  return {input[0], input[1], input[2], input[3], filter[0], filter[1],     filter[3],    hd.out,
          wd.out,   st[0],    st[1],    dil[0],   dil[1],    hd.pad_before, wd.pad_before};
}

}  // namespace kiln::runtime

// Helpers shared by the convolution kernel tests (conv_direct_test.cc, conv_bf16_test.cc,
// conv_shallow_test.cc): a case's shapes and attributes, and the multiplies of a convolution,
// walked independently of the kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/runtime/kernels/conv_geom.h"

namespace kiln::runtime::conv_test {

// One convolution: input NHWC and filter HWIO shapes, strides, dilations, padding.
struct WindowCase {
  std::vector<int64_t> input, filter, strides, dilations;
  std::string padding;
};

inline std::string describe_window(const WindowCase& c) {
  return "input " + Shape(c.input).to_string() + " filter " + Shape(c.filter).to_string() +
         " strides " + std::to_string(c.strides[0]) + "," + std::to_string(c.strides[1]) +
         " dilations " + std::to_string(c.dilations[0]) + "," + std::to_string(c.dilations[1]) +
         " " + c.padding;
}

// Calls fn(x_index, w_index, y_index) for every multiply of the convolution (NHWC input, HWIO
// filter, NHWC output; flat indices), padding taps left out.
template <typename F>
void for_each_multiply(const ConvGeom& g, F&& fn) {
  for (int64_t n = 0; n < g.n; ++n)
    for (int64_t y = 0; y < g.oh; ++y)
      for (int64_t xo = 0; xo < g.ow; ++xo)
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t iy = y * g.sh - g.ph + i * g.dh, ix = xo * g.sw - g.pw + j * g.dw;
            if (iy < 0 || iy >= g.h || ix < 0 || ix >= g.w) continue;
            for (int64_t ch = 0; ch < g.c; ++ch)
              for (int64_t o = 0; o < g.o; ++o)
                fn(size_t(((n * g.h + iy) * g.w + ix) * g.c + ch),
                   size_t(((i * g.kw + j) * g.c + ch) * g.o + o),
                   size_t(((n * g.oh + y) * g.ow + xo) * g.o + o));
          }
}

}  // namespace kiln::runtime::conv_test

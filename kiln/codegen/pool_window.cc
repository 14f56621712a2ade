#include "kiln/codegen/pool_window.h"

#include <fmt/format.h>

#include "kiln/codegen/scalar_ops.h"
#include "kiln/ir/error.h"
#include "kiln/ir/shape_rules.h"

namespace kiln::codegen {
namespace {

// Windows that tile the image: window == stride, no padding, no row or column dropped.
bool tiling_pool_grad_window(const PoolWindow& pw) {
  return !pw.clipped && pw.kh == pw.sh && pw.kw == pw.sw && pw.sh * pw.sw >= 2 &&
         pw.oh * pw.sh == pw.h && pw.ow * pw.sw == pw.w;
}

// max(lo, min(v, hi)) on i64 indices.
llvm::Value* clamp(llvm::IRBuilder<>& b, llvm::Value* v, int64_t lo, int64_t hi) {
  llvm::Value* c = b.CreateSelect(b.CreateICmpSGT(v, b.getInt64(hi)), b.getInt64(hi), v);
  return b.CreateSelect(b.CreateICmpSLT(c, b.getInt64(lo)), b.getInt64(lo), c);
}

// lo <= v < hi
llvm::Value* inside(llvm::IRBuilder<>& b, llvm::Value* v, int64_t lo, int64_t hi) {
  return b.CreateAnd(b.CreateICmpSGE(v, b.getInt64(lo)), b.CreateICmpSLT(v, b.getInt64(hi)));
}

llvm::Value* linear(llvm::IRBuilder<>& b, llvm::Value* row, int64_t stride, llvm::Value* col) {
  return b.CreateAdd(b.CreateMul(row, b.getInt64(stride), "", true, true), col, "", true, true);
}

// Reads the operand at (image row, image column) of the element being computed.
using WindowRead = std::function<llvm::Value*(llvm::Value* row, llvm::Value* col)>;

struct WindowMax {
  llvm::Value* value = nullptr;
  // The first maximum's place in the window, ky * kw + kx as i32 (if asked): a constant per
  // window element, so that the vectorized select between places stays 32-bit (an image
  // position computed in 64 bits made two registers of every select and compare).
  llvm::Value* position = nullptr;
};

// The first maximum of the window of output (oy, ox) (the eager kernel's order: row-major over
// the window clipped to the image, starting from its first element).
WindowMax window_max(llvm::IRBuilder<>& b, const PoolWindow& pw, DType t, llvm::Value* oy,
                     llvm::Value* ox, const WindowRead& x, bool want_position) {
  llvm::Value* y0 = b.CreateSub(b.CreateMul(oy, b.getInt64(pw.sh)), b.getInt64(pw.pt));
  llvm::Value* x0 = b.CreateSub(b.CreateMul(ox, b.getInt64(pw.sw)), b.getInt64(pw.pl));
  // The clipped window's first element (the window is never empty).
  llvm::Value* fy = pw.clipped ? clamp(b, y0, 0, pw.h - 1) : y0;
  llvm::Value* fx = pw.clipped ? clamp(b, x0, 0, pw.w - 1) : x0;
  WindowMax m;
  m.value = x(fy, fx);
  if (want_position)
    m.position =
        b.CreateTrunc(linear(b, b.CreateSub(fy, y0), pw.kw, b.CreateSub(fx, x0)), b.getInt32Ty());
  for (int64_t ky = 0; ky < pw.kh; ++ky) {
    llvm::Value* iy = b.CreateAdd(y0, b.getInt64(ky));
    llvm::Value* valid_y = pw.clipped ? inside(b, iy, 0, pw.h) : nullptr;
    if (pw.clipped) iy = clamp(b, iy, 0, pw.h - 1);
    for (int64_t kx = 0; kx < pw.kw; ++kx) {
      if (!pw.clipped && ky == 0 && kx == 0) continue;  // the start
      llvm::Value* ix = b.CreateAdd(x0, b.getInt64(kx));
      llvm::Value* valid = nullptr;
      if (pw.clipped) {
        valid = b.CreateAnd(valid_y, inside(b, ix, 0, pw.w));
        ix = clamp(b, ix, 0, pw.w - 1);  // read in the image, never taken
      }
      llvm::Value* v = x(iy, ix);
      llvm::Value* take = emit_arg_replaces(b, OpKind::ArgMax, t, v, m.value);
      if (valid != nullptr) take = b.CreateAnd(valid, take);
      m.value = b.CreateSelect(take, v, m.value);
      if (want_position)
        m.position = b.CreateSelect(take, b.getInt32(int32_t(ky * pw.kw + kx)), m.position);
    }
  }
  return m;
}

// max_pool2d at output position (oy, ox).
llvm::Value* emit_max_pool(llvm::IRBuilder<>& b, const PoolWindow& pw, DType t, llvm::Value* oy,
                           llvm::Value* ox, const WindowRead& x) {
  return window_max(b, pw, t, oy, ox, x, false).value;
}

// max_pool2d_grad at input position (y, xpos); `x` reads the pooled input, `dy` the output
// gradient (at output positions).
llvm::Value* emit_max_pool_grad(llvm::IRBuilder<>& b, const PoolWindow& pw, DType t, llvm::Value* y,
                                llvm::Value* xpos, const WindowRead& x, const WindowRead& dy) {
  // The windows covering (y, x): along each axis, output positions o with
  // o * s - pad <= y < o * s - pad + k, i.e. o in (hi - ceil(k / s), hi] for hi = (y + pad) / s.
  const int64_t jy_count = (pw.kh + pw.sh - 1) / pw.sh, jx_count = (pw.kw + pw.sw - 1) / pw.sw;
  llvm::Value* ty = b.CreateAdd(y, b.getInt64(pw.pt));
  llvm::Value* tx = b.CreateAdd(xpos, b.getInt64(pw.pl));
  llvm::Value* oy_hi = b.CreateUDiv(ty, b.getInt64(pw.sh));
  llvm::Value* ox_hi = b.CreateUDiv(tx, b.getInt64(pw.sw));
  llvm::Type* ft = t == DType::f64 ? b.getDoubleTy() : b.getFloatTy();
  llvm::Value* zero = llvm::ConstantFP::get(ft, 0.0);
  llvm::Value* acc = zero;
  // A window's coordinate along one axis: whether it covers the position, and the coordinate
  // clamped to the output (an uncovering candidate is read there and never taken).
  // `offset`: the position's place along the axis in that window (when it covers it).
  auto candidate = [&](llvm::Value* hi, int64_t j, llvm::Value* t_pos, int64_t s, int64_t k,
                       int64_t out, llvm::Value*& covers, llvm::Value*& offset) {
    llvm::Value* o = b.CreateSub(hi, b.getInt64(j));
    offset = b.CreateSub(t_pos, b.CreateMul(o, b.getInt64(s)));
    covers = b.CreateAnd(inside(b, o, 0, out), b.CreateICmpSLT(offset, b.getInt64(k)));
    return clamp(b, o, 0, out - 1);
  };
  for (int64_t jy = jy_count - 1; jy >= 0; --jy) {  // windows in row-major order
    llvm::Value *covers_y = nullptr, *offset_y = nullptr;
    llvm::Value* oy = candidate(oy_hi, jy, ty, pw.sh, pw.kh, pw.oh, covers_y, offset_y);
    for (int64_t jx = jx_count - 1; jx >= 0; --jx) {
      llvm::Value *covers_x = nullptr, *offset_x = nullptr;
      llvm::Value* ox = candidate(ox_hi, jx, tx, pw.sw, pw.kw, pw.ow, covers_x, offset_x);
      WindowMax m = window_max(b, pw, t, oy, ox, x, true);
      // The position's place in this window (meaningful where the window covers it).
      llvm::Value* me = b.CreateTrunc(linear(b, offset_y, pw.kw, offset_x), b.getInt32Ty());
      llvm::Value* hit =
          b.CreateAnd(b.CreateAnd(covers_y, covers_x), b.CreateICmpEQ(m.position, me));
      acc = b.CreateFAdd(acc, b.CreateSelect(hit, dy(oy, ox), zero));
    }
  }
  return acc;
}

// max_pool2d_grad at position (ry, rx) of a tiling window (PoolWindow of tiling_pool_grad):
// exactly one window covers it, so the value is +0 plus dy of that window where its first
// maximum (row-major over the window) is at (ry, rx): the general form above, term for term.
llvm::Value* emit_tiled_max_pool_grad(llvm::IRBuilder<>& b, const PoolWindow& pw, DType t,
                                      const WindowTile& tile, int64_t ry, int64_t rx,
                                      const WindowRead& x, const WindowRead& dy) {
  llvm::Value* best = x(tile.rows[0], tile.cols[0]);
  llvm::Value* position = b.getInt32(0);
  for (int64_t ky = 0; ky < pw.kh; ++ky)
    for (int64_t kx = 0; kx < pw.kw; ++kx) {
      if (ky == 0 && kx == 0) continue;
      llvm::Value* v = x(tile.rows[size_t(ky)], tile.cols[size_t(kx)]);
      llvm::Value* take = emit_arg_replaces(b, OpKind::ArgMax, t, v, best);
      best = b.CreateSelect(take, v, best);
      position = b.CreateSelect(take, b.getInt32(int32_t(ky * pw.kw + kx)), position);
    }
  llvm::Value* hit = b.CreateICmpEQ(position, b.getInt32(int32_t(ry * pw.kw + rx)));
  llvm::Value* zero =
      llvm::ConstantFP::get(t == DType::f64 ? b.getDoubleTy() : b.getFloatTy(), 0.0);
  return b.CreateFAdd(zero, b.CreateSelect(hit, dy(tile.out_row, tile.out_col), zero));
}

// The place of `v` in `values`, or -1.
int64_t place_of(const std::vector<llvm::Value*>& values, llvm::Value* v) {
  for (size_t i = 0; i < values.size(); ++i)
    if (values[i] == v) return int64_t(i);
  return -1;
}

}  // namespace

PoolWindow pool_window(const ir::Node& n) {
  const char* op = op_name(n.op());
  const Shape& in = n.input(0)->shape();
  const auto& pool = n.attrs().get_ints("pool_size", op);
  const auto& st = n.attrs().get_ints("strides", op);
  const auto& padding = n.attrs().get_string("padding", op);
  rules::WindowDim hd = rules::window_dim(in[1], pool[0], st[0], 1, padding, op);
  rules::WindowDim wd = rules::window_dim(in[2], pool[1], st[1], 1, padding, op);
  PoolWindow pw;
  pw.h = in[1];
  pw.w = in[2];
  pw.kh = pool[0];
  pw.kw = pool[1];
  pw.sh = st[0];
  pw.sw = st[1];
  pw.pt = hd.pad_before;
  pw.pl = wd.pad_before;
  pw.oh = hd.out;
  pw.ow = wd.out;
  pw.clipped = pw.pt > 0 || pw.pl > 0 || (pw.oh - 1) * pw.sh + pw.kh > pw.h ||
               (pw.ow - 1) * pw.sw + pw.kw > pw.w;
  if (pw.kh * pw.kw > (int64_t{1} << 31) - 1)
    throw Error(
        fmt::format("codegen: {} with a {}x{} window: places in a window must fit in 32 bits "
                    "for the generated kernel",
                    op, pw.kh, pw.kw));
  return pw;
}

llvm::Value* emit_pool(llvm::IRBuilder<>& b, const ir::Node& n, const Index& idx,
                       const OperandRead& read, const WindowTile* tile) {
  const PoolWindow pw = pool_window(n);
  const DType t = n.input(0)->dtype();
  auto operand = [&](size_t i) -> WindowRead {
    return [&, i](llvm::Value* row, llvm::Value* col) {
      return read(i, Index{idx[0], row, col, idx[3]});
    };
  };
  if (n.is_op(OpKind::MaxPool2D)) return emit_max_pool(b, pw, t, idx[1], idx[2], operand(0));
  if (n.is_op(OpKind::MaxPool2DGrad)) {
    if (tile != nullptr && int64_t(tile->rows.size()) == pw.sh &&
        int64_t(tile->cols.size()) == pw.sw && tiling_pool_grad_window(pw)) {
      const int64_t ry = place_of(tile->rows, idx[1]), rx = place_of(tile->cols, idx[2]);
      if (ry >= 0 && rx >= 0)
        return emit_tiled_max_pool_grad(b, pw, t, *tile, ry, rx, operand(0), operand(1));
    }
    return emit_max_pool_grad(b, pw, t, idx[1], idx[2], operand(0), operand(1));
  }
  internal_error(__FILE__, __LINE__, "emit_pool: not a max_pool2d op");
}

std::optional<std::pair<int64_t, int64_t>> tiling_pool_grad(const ir::Graph& body, const Shape& s) {
  if (s.rank() != 4) return std::nullopt;
  for (const auto& n : body.nodes()) {
    if (!n->is_op(OpKind::MaxPool2DGrad) || n->output()->shape() != s) continue;
    const PoolWindow pw = pool_window(*n);
    if (tiling_pool_grad_window(pw)) return std::make_pair(pw.sh, pw.sw);
  }
  return std::nullopt;
}

}  // namespace kiln::codegen

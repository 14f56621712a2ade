// lay_out: the layered layout of the step report's collapsed graph (report_data.h).
#include <algorithm>
#include <numeric>

#include "kiln/frontend/function/report_data.h"

namespace kiln::report_detail {

void lay_out(std::vector<Box>& all, Drawing& drawing, int per_row) {
  per_row = std::max(per_row, 1);
  // Boxes are numbered in the program order of their first node, so an edge to a later box
  // goes forward; an edge back (a scope box that also holds later nodes) does not layer.
  std::vector<std::vector<int>> preds(all.size());
  for (const Edge& e : drawing.edges)
    if (e.from < e.to) preds[size_t(e.to)].push_back(e.from);
  int layers = 0;
  for (int b : drawing.boxes) {
    Box& box = all[size_t(b)];
    box.layer = 0;
    for (int a : preds[size_t(b)]) box.layer = std::max(box.layer, all[size_t(a)].layer + 1);
    layers = std::max(layers, box.layer + 1);
  }
  std::vector<std::vector<int>> in_layer(static_cast<size_t>(layers));
  for (int b : drawing.boxes) in_layer[size_t(all[size_t(b)].layer)].push_back(b);

  // Rows: each layer in order of the mean x of its boxes' predecessors (placed in earlier
  // layers), then program order; at most per_row boxes a row.
  size_t max_cols = 1;
  for (const auto& l : in_layer) max_cols = std::max(max_cols, std::min(l.size(), size_t(per_row)));
  const double row_width = double(max_cols) * (kBoxWidth + kGapX) - kGapX;
  double y = kMargin;
  for (std::vector<int>& l : in_layer) {
    std::vector<double> key(l.size());
    for (size_t i = 0; i < l.size(); ++i) {
      const auto& p = preds[size_t(l[i])];
      double sum = 0;
      for (int a : p) sum += all[size_t(a)].x;
      key[i] = p.empty() ? -1.0 : sum / double(p.size());
    }
    std::vector<size_t> order(l.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return key[a] < key[b]; });
    for (size_t r = 0; r < order.size(); r += size_t(per_row)) {
      size_t n = std::min(order.size() - r, size_t(per_row));
      double width = double(n) * (kBoxWidth + kGapX) - kGapX;
      double x = kMargin + (row_width - width) / 2;
      for (size_t c = 0; c < n; ++c) {
        Box& box = all[size_t(l[order[r + c]])];
        box.x = x + double(c) * (kBoxWidth + kGapX);
        box.y = y;
      }
      y += kBoxHeight + kGapY;
    }
  }
  drawing.width = row_width + 2 * kMargin;
  drawing.height = y - kGapY + kMargin;
}

}  // namespace kiln::report_detail

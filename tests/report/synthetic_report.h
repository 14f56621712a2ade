// A step report's data for a synthetic graph of n boxes (no compilation: the report's layout
// and page at sizes no test step compiles quickly): box i is fusion group "g<i>" with edges
// from boxes i-1 and i-7, in layers of 50 boxes, each run by one step (a kernel table of n
// rows); n buffers in a 100 KiB arena.
#pragma once

#include <fmt/format.h>

#include "kiln/frontend/function/report_data.h"

namespace kiln::test {

inline report_detail::ReportData synthetic_report(int n) {
  using report_detail::Box;
  report_detail::ReportData d;
  d.title = fmt::format("synthetic graph of {} boxes", n);
  report_detail::PartLayout part;
  for (int i = 0; i < n; ++i) {
    Box b;
    b.id = fmt::format("b{}", i);
    b.group = fmt::format("g{}", i);
    b.kind = "loop";
    b.label = b.group;
    b.scope = fmt::format("model/layer_{}", i / 50);
    b.ops.push_back({"", "add", "f32[4]", b.scope + "/add"});
    b.first_node = i;
    b.layer_box = i / 50;
    if (i % 50 == 0) {
      Box layer;
      layer.id = fmt::format("l{}", i / 50);
      layer.kind = "layer";
      layer.scope = b.scope;
      layer.label = fmt::format("layer_{}", i / 50);
      layer.first_node = i;
      part.layers.boxes.push_back(int(d.layers.size()));
      if (i > 0) part.layers.edges.push_back({int(d.layers.size()) - 1, int(d.layers.size())});
      d.layers.push_back(std::move(layer));
    }
    d.layers.back().members.push_back(i);
    part.groups.boxes.push_back(i);
    if (i >= 1) part.groups.edges.push_back({i - 1, i});
    if (i >= 7) part.groups.edges.push_back({i - 7, i});
    d.boxes.push_back(std::move(b));
    d.fusion_groups++;

    report_detail::Buffer buf;
    buf.value = fmt::format("%{}", i);
    buf.kind = "arena";
    buf.type = "f32[256]";
    buf.in_arena = true;
    buf.offset = size_t(i % 100) * 1024;
    buf.size = 1024;
    buf.first_step = i / 10;
    buf.last_step = i / 10 + 3;
    d.buffers.push_back(std::move(buf));

    report_detail::StepRow step;  // one kernel per box
    step.index = i;
    step.name = d.boxes.back().group;
    step.kind = "generated";
    step.shape = "f32[256]";
    step.box = d.boxes.back().id;
    step.flops = 256.0 * (1 + i % 7);
    step.bytes = 3 * 1024.0;
    d.boxes.back().steps.push_back(i);
    d.steps.push_back(std::move(step));
  }
  d.graph_nodes = n;
  d.num_steps = n / 10 + 5;
  d.arena_bytes = d.planned_bytes = d.lower_bound_bytes = d.scratch_offset = 100 * 1024;
  report_detail::lay_out(d.boxes, part.groups);
  report_detail::lay_out(d.layers, part.layers);
  d.parts.push_back(std::move(part));
  return d;
}

}  // namespace kiln::test

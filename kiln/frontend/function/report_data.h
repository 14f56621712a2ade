// What the step report (report.h) draws, as plain data: the optimized graph collapsed into
// boxes with their layered layout, the memory plan's buffers and the executable's steps with
// their times. Built by build_report_data from one CompiledForm; rendered by report_html.cc.
// Internal to the report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/frontend/function/report.h"

namespace kiln::report_detail {

// Which part of a training step a node belongs to.
enum class Part : uint8_t {
  kForward,   // everything before the gradients
  kGradient,  // nodes the gradient tape recorded (named "gradient/...")
  kUpdate,    // assignments and what reads a gradient outside the tape (optimizer updates)
};
const char* part_name(Part part);  // "forward", "gradient", "update"

// One op of a box, as the expanded box lists it.
struct BoxOp {
  std::string value;  // "%12" (top-level value) or "" inside a fusion body
  std::string op;     // "matmul"
  std::string type;   // "f32[64,128]"
  std::string name;   // "dense_1/matmul"
};

// A box of the collapsed graph: one fusion group, or the unfused nodes of one name scope (and
// part) that are neither constants nor views.
struct Box {
  std::string id;        // "b12": unique in the report
  std::string group;     // the fusion group's name; empty for a scope box
  std::string kind;      // fusion: "loop" | "reduction" | "contraction"; scope: "ops"
  std::string label;     // the group name, or the scope and its op count
  std::string scope;     // the layer name scope ("sequential/dense_1"), may be empty
  std::string location;  // "model.cc:40:7" of the user's code, or ""
  Part part = Part::kForward;
  std::vector<BoxOp> ops;
  std::vector<int> steps;  // executable steps run for it
  int64_t ns = 0;          // their measured time per call (0 without a timing)
  int first_node = 0;      // program order of its first node
  // A box of the layer view: the boxes it collapses (indices into ReportData::boxes). A box of
  // the group view: the index of its layer box (ReportData::layers).
  std::vector<int> members;
  int layer_box = -1;
  // Layout: layer (row band) and position in pixels of its part's drawing.
  int layer = 0;
  double x = 0, y = 0;
};

struct Edge {
  int from = 0, to = 0;  // box indices (same part)
};

// One drawing: boxes (indices into a vector of boxes), edges, and size in pixels.
struct Drawing {
  std::vector<int> boxes;
  std::vector<Edge> edges;
  double width = 0, height = 0;
};

// One part, drawn two ways: by fusion group and scope (`groups`, into ReportData::boxes) and
// collapsed to layers (`layers`, into ReportData::layers).
struct PartLayout {
  Part part = Part::kForward;
  Drawing groups, layers;
};

// A buffer of the memory plan: a value with its own bytes (arena, parameter, variable or
// output), its lifetime and the values that view its bytes.
struct Buffer {
  std::string value;  // "%12"
  std::string kind;   // codegen::buffer_kind_name, or "pooled" / "external" (kept elsewhere)
  std::string type;
  std::string producer;  // the step or op that writes it, or "" (parameters, entries)
  bool in_arena = false;
  bool donated = false;  // a variable's buffer its new value is written into (in place)
  size_t offset = 0, size = 0;
  int first_step = 0, last_step = 0;
  std::vector<std::string> views;
};

struct Scratch {
  std::string step, role, type;
  size_t offset = 0, size = 0;
  int node_step = -1;  // program position of its step's node (-1 unknown)
};

// One row of the kernel table: an executable step.
struct StepRow {
  int index = 0;
  std::string name;
  std::string kind;  // "generated", "runtime kernel", "runtime GEMM + generated epilogue", ...
  std::string shape;
  std::string box;  // the id of its box, or ""
  double flops = 0, bytes = 0;
  int64_t ns = 0;                      // measured per call (0 without a timing)
  std::vector<NestedStepTime> nested;  // a cond / while step's body steps (with a timing)
};

struct ReportData {
  std::string title;
  bool timed = false;
  StepTiming timing;
  bool compared = false;
  ModeComparison comparison;
  std::vector<Box> boxes;
  // The layer view's boxes: one per layer (the first two components of a box's scope, as
  // "sequential/dense") and part; kind "layer", label the layer, ns the members' sum.
  std::vector<Box> layers;
  std::vector<PartLayout> parts;  // the parts that have boxes, in Part order
  int num_steps = 0;              // top-level nodes: the memory plan's positions
  size_t arena_bytes = 0, planned_bytes = 0, lower_bound_bytes = 0, scratch_offset = 0;
  std::vector<Buffer> buffers;
  std::vector<Scratch> scratch;
  std::vector<StepRow> steps;
  int graph_nodes = 0, fusion_groups = 0, kernels = 0;
};

// Box geometry of the graph drawings, in pixels.
inline constexpr double kBoxWidth = 200, kBoxHeight = 46, kGapX = 24, kGapY = 40, kMargin = 16;

// Collects everything from `form` (and `timing` when not null).
ReportData build_report_data(const CompiledForm& form, const std::string& title,
                             const StepTiming* timing);

// The page (report_html.cc).
std::string render_html(const ReportData& data);

// Lays out `drawing` (fills its boxes' layer/x/y and its size): boxes in layers by their
// longest path from the drawing's sources (only edges to a later box, in program order of their
// first nodes, count), each layer in rows of at most `per_row` boxes ordered by the mean position
// of their predecessors.
void lay_out(std::vector<Box>& boxes, Drawing& drawing, int per_row = 8);

}  // namespace kiln::report_detail

// report_html: the step report (report.h) as one HTML page. Everything is inline (CSS, SVG, a
// little plain script for sorting, expanding boxes and recording console errors on the page).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "kiln/codegen/memory_plan.h"
#include "kiln/frontend/function/report.h"
#include "kiln/frontend/function/report_data.h"

namespace kiln {
namespace {

using report_detail::Box;
using report_detail::Buffer;
using report_detail::ReportData;

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// `s` cut to at most n bytes (at a character boundary) with an ellipsis when longer.
std::string shorten(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n - 1;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return s.substr(0, cut) + "\u2026";
}

// The kernel table's kind of a profiler category.
std::string category_kind(const std::string& category) {
  if (category == "kernel") return "generated";
  if (category == "contraction") return "runtime GEMM + generated epilogue";
  if (category == "op") return "runtime kernel";
  if (category == "assign") return "assignment";
  if (category == "control") return "control flow";
  return category;
}

std::string ms(int64_t ns) { return fmt::format("{:.3f}", double(ns) / 1e6); }

double share_of(const ReportData& d, int64_t ns) {
  return d.timed && d.timing.step_ns > 0 ? double(ns) / double(d.timing.step_ns) : 0.0;
}

// Yellow (no time) to red (the whole step), for a share in [0, 1].
std::string heat(double share) {
  share = std::clamp(std::sqrt(std::clamp(share, 0.0, 1.0)), 0.0, 1.0);
  return fmt::format("hsl({:.0f},90%,{:.0f}%)", 55.0 * (1.0 - share), 90.0 - 35.0 * share);
}

const char* kCss = R"(
body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}
h1{font-size:20px;margin:0 0 8px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ccc}
h3{font-size:15px;margin:16px 0 4px}
.figures{display:flex;flex-wrap:wrap;gap:8px 28px}.figures div b{display:block;font-size:16px}
.scroll{overflow:auto;max-height:80vh;border:1px solid #ddd;background:#fcfcfc}
svg text{font:11px system-ui,sans-serif;pointer-events:none}
.box rect{stroke:#555;stroke-width:1;rx:4}.box{cursor:pointer}.box.sel rect{stroke:#000;stroke-width:3}
.box .sub{fill:#444;font-size:10px}.edge{stroke:#999;fill:none;stroke-width:1}
.buf{stroke:#1b4f72;stroke-width:.5;fill:#5dade2;fill-opacity:.75}.buf.out{fill:#f5b041}
.scr{fill:#af7ac5;fill-opacity:.8;stroke:#6c3483;stroke-width:.5}
.axis{stroke:#333;stroke-width:1}.bound{stroke:#c0392b;stroke-dasharray:6 4}
table{border-collapse:collapse;margin:4px 0}td,th{padding:2px 8px;border-bottom:1px solid #eee;text-align:left}
td.n,th.n{text-align:right}th{background:#f0f0f0;position:sticky;top:0}
table.sortable th{cursor:pointer}table.sortable th:after{content:" \2195";color:#aaa}
details{margin:2px 0}details[open]{background:#f7f7f7}.legend span{display:inline-block;width:40px;height:10px}
#console-errors{color:#b00;border:1px solid #b00;padding:4px}
tr.nested td{color:#555;font-size:12px}
.bands{position:relative}.band{position:absolute;left:0;right:0;content-visibility:auto}
#graph.view-layers div[data-view=groups],#graph.view-groups div[data-view=layers]{display:none}
#graph.view-layers button[data-show=layers],#graph.view-groups button[data-show=groups]{font-weight:bold}
)";

// Records errors on the page itself (a headless browser's DOM shows them); runs first.
const char* kEarlyScript = R"(
(function(){var list=[];function put(m){list.push(String(m));var e=document.getElementById('console-errors');if(e){e.textContent=list.join('\n');e.hidden=false;}}
window.addEventListener('error',function(e){put('error: '+e.message);});
var ce=console.error;console.error=function(){put(Array.prototype.join.call(arguments,' '));ce.apply(console,arguments);};
window.kilnErrors=list;})();
)";

// Sorting the tables (keys read once, rows moved in one fragment per body; a paged table keeps
// as many rows shown as it had), opening a box's ops, then marking the page ready.
const char* kScript = R"(
(function(){
function key(c){return c.hasAttribute('data-v')?parseFloat(c.getAttribute('data-v')):c.textContent;}
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){th.addEventListener('click',function(){
    var up=th.getAttribute('data-dir')!=='up',bodies=t.tBodies,shown=bodies[0].rows.length,rows=[];
    th.setAttribute('data-dir',up?'up':'down');
    Array.prototype.forEach.call(bodies,function(b){Array.prototype.forEach.call(b.rows,function(r){rows.push({r:r,n:rows.length,k:key(r.cells[i])});});});
    rows.sort(function(a,b){var x=a.k,y=b.k,c=(typeof x==='number'&&typeof y==='number')?x-y:(x<y?-1:x>y?1:0);return (up?c:-c)||a.n-b.n;});
    var f=[document.createDocumentFragment(),document.createDocumentFragment()];
    rows.forEach(function(e,n){f[bodies.length>1&&n>=shown?1:0].appendChild(e.r);});
    bodies[0].appendChild(f[0]);if(bodies.length>1)bodies[1].appendChild(f[1]);});});});
document.querySelectorAll('button[data-unpage]').forEach(function(b){b.addEventListener('click',function(){
  document.querySelectorAll('#'+b.getAttribute('data-unpage')+' tbody.more').forEach(function(m){m.hidden=false;});
  b.parentNode.hidden=true;});});
var graph=document.getElementById('graph');
function show(v){graph.className='view-'+v;}
document.querySelectorAll('button[data-show]').forEach(function(b){b.addEventListener('click',function(){show(b.getAttribute('data-show'));});});
document.querySelectorAll('g.layer').forEach(function(g){g.addEventListener('click',function(){
  show('groups');document.querySelectorAll('g.box.sel').forEach(function(s){s.classList.remove('sel');});
  var first=null;g.getAttribute('data-members').split(' ').forEach(function(id){
    var m=document.querySelector('g.box[data-box="'+id+'"]');if(m){m.classList.add('sel');if(!first)first=m;}});
  if(first)first.scrollIntoView({block:'nearest'});});});
document.querySelectorAll('g.box:not(.layer)').forEach(function(g){g.addEventListener('click',function(){
  document.querySelectorAll('g.box.sel').forEach(function(s){s.classList.remove('sel');});
  g.classList.add('sel');var d=document.getElementById('detail-'+g.getAttribute('data-box'));
  if(d){d.open=true;d.scrollIntoView({block:'nearest'});}});});
document.body.setAttribute('data-ready','1');
})();
)";

void figures(std::string& o, const ReportData& d) {
  o += "<section id=\"summary\"";
  if (d.timed)
    o += fmt::format(" data-step-ns=\"{}\" data-overhead-ns=\"{}\" data-calls=\"{}\"",
                     d.timing.step_ns, d.timing.overhead_ns, d.timing.calls);
  o += "><div class=\"figures\">";
  auto fig = [&](std::string_view name, const std::string& value) {
    o += fmt::format("<div>{}<b>{}</b></div>", esc(name), esc(value));
  };
  if (d.timed) {
    fig("step time (mean of " + std::to_string(d.timing.calls) + " calls)",
        ms(d.timing.step_ns) + " ms");
    fig("runtime between steps", ms(d.timing.overhead_ns) + " ms");
  } else {
    fig("step time", "not measured");
  }
  fig("graph nodes", std::to_string(d.graph_nodes));
  fig("fusion groups", std::to_string(d.fusion_groups));
  fig("kernels compiled", std::to_string(d.kernels));
  fig("executable steps", std::to_string(d.steps.size()));
  fig("arena", codegen::format_bytes(d.arena_bytes));
  fig("planned values", codegen::format_bytes(d.planned_bytes));
  fig("lower bound", codegen::format_bytes(d.lower_bound_bytes));
  fig("scratch", codegen::format_bytes(d.arena_bytes - d.scratch_offset));
  o += "</div></section>\n";
}

// A drawing is cut into bands of this many rows of boxes, each its own <svg> in a block with
// `content-visibility: auto`: the browser styles, lays out and paints only the bands near the
// scrolled position, so a drawing of 10,000 boxes costs what a few hundred do. (Hiding parts of
// one <svg> would not do: browsers style an SVG's hidden elements too.)
constexpr int kBandRows = 12;

// Rows a long table shows until "show all" is clicked: laying out 10,000 rows takes a browser
// seconds, and a sort has to lay them all out again.
constexpr size_t kPageRows = 500;

// A sortable table's opening tag, with its pager when it has more than kPageRows rows.
std::string sortable_table(const char* id, size_t rows) {
  if (rows <= kPageRows) return fmt::format("<table class=\"sortable\" id=\"{}\">", id);
  return fmt::format(
      "<p class=\"pager\">The first {} of {} rows are shown; sorting orders all of them. "
      "<button data-unpage=\"{}\">show all</button></p>\n<table class=\"sortable\" "
      "id=\"{}\">",
      kPageRows, rows, id, id);
}

// After a table's row: once kPageRows rows of a longer table are out, the rest go into a hidden
// <tbody> (the browser styles and lays out none of it until "show all").
std::string after_row(size_t& emitted, size_t rows) {
  return ++emitted == kPageRows && rows > kPageRows ? "</tbody><tbody class=\"more\" hidden>\n"
                                                    : "";
}

// One part drawn one way: `view` "groups" (boxes of fusion groups and scopes) or "layers".
void drawing(std::string& o, const ReportData& d, const std::vector<Box>& all,
             const report_detail::Drawing& dr, const char* part, const char* view) {
  const bool layers = std::string_view(view) == "layers";
  // Band borders lie in the gaps between rows (report_layout.cc: rows kBoxHeight + kGapY
  // apart from kMargin), so every box is inside one band; an edge is drawn in each band it
  // crosses, each copy clipped to its band.
  using report_detail::kBoxHeight, report_detail::kBoxWidth, report_detail::kGapY;
  const double band_height = kBandRows * (kBoxHeight + kGapY);
  const double origin = report_detail::kMargin - kGapY / 2;
  const size_t band_count =
      std::max<size_t>(1, size_t(std::ceil((dr.height - origin) / band_height)));
  auto band_of = [&](double y) {
    return std::min(band_count - 1, size_t(std::max(0.0, (y - origin) / band_height)));
  };
  std::vector<std::string> edge_bands(band_count), box_bands(band_count);
  for (const auto& e : dr.edges) {
    const Box& a = all[size_t(e.from)];
    const Box& b = all[size_t(e.to)];
    double x1 = a.x + kBoxWidth / 2, y1 = a.y + kBoxHeight;
    double x2 = b.x + kBoxWidth / 2, y2 = b.y;
    if (b.y <= a.y) y1 = a.y, y2 = b.y + kBoxHeight;  // an edge back up
    const std::string path = fmt::format(
        "<path class=\"edge\" d=\"M{:.0f} {:.0f}C{:.0f} {:.0f} {:.0f} {:.0f} "
        "{:.0f} {:.0f}\"/>\n",
        x1, y1, x1, (y1 + y2) / 2, x2, (y1 + y2) / 2, x2, y2);
    for (size_t k = band_of(std::min(y1, y2)); k <= band_of(std::max(y1, y2)); ++k)
      edge_bands[k] += path;
  }
  for (int bi : dr.boxes) {
    const Box& b = all[size_t(bi)];
    std::string& band = box_bands[band_of(b.y)];
    const double share = share_of(d, b.ns);
    std::string fill = d.timed           ? heat(share)
                       : layers          ? "#e8eef4"
                       : b.group.empty() ? "#eeeeee"
                                         : "#d6e4f0";
    std::string attrs;
    if (layers) {
      std::string members;
      for (int m : b.members) members += (members.empty() ? "b" : " b") + std::to_string(m);
      attrs = fmt::format(" data-layer=\"{}\" data-members=\"{}\"", esc(b.scope), members);
    } else {
      attrs = b.group.empty() ? fmt::format(" data-scope=\"{}\"", esc(b.scope))
                              : fmt::format(" data-group=\"{}\"", esc(b.group));
      attrs += fmt::format(" data-layer-of=\"l{}\"", b.layer_box);
    }
    if (!b.location.empty()) attrs += fmt::format(" data-location=\"{}\"", esc(b.location));
    if (d.timed) attrs += fmt::format(" data-ns=\"{}\"", b.ns);
    std::string sub =
        d.timed ? fmt::format("{} ms, {:.1f}%", ms(b.ns), 100 * share) : std::string(b.kind);
    if (!layers && !b.scope.empty() && !b.group.empty()) sub += " \u00b7 " + b.scope;
    if (layers)
      sub += fmt::format(" \u00b7 {} box{}", b.members.size(), b.members.size() == 1 ? "" : "es");
    band += fmt::format(
        "<g class=\"{}\" data-box=\"{}\"{} transform=\"translate({:.0f},{:.0f})\"><title>{}"
        "\n{}\nkind: {}</title><rect width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\"/><text "
        "x=\"6\" y=\"18\">{}</text><text class=\"sub\" x=\"6\" y=\"35\">{}</text></g>\n",
        layers ? "box layer" : "box", b.id, attrs, b.x, b.y, esc(layers ? b.scope : b.label),
        b.location.empty() ? std::string("source location unknown") : esc(b.location), esc(b.kind),
        kBoxWidth, kBoxHeight, fill, esc(shorten(b.label, 34)), esc(shorten(sub, 38)));
  }
  o += fmt::format(
      "<div class=\"scroll\" data-view=\"{}\"><div class=\"bands\" style=\"width:{:.0f}px;"
      "height:{:.0f}px\">\n",
      view, dr.width, dr.height);
  for (size_t k = 0; k < band_count; ++k) {
    if (box_bands[k].empty() && edge_bands[k].empty()) continue;
    const double top = k == 0 ? 0 : origin + double(k) * band_height;
    const double height = std::min(dr.height, origin + double(k + 1) * band_height) - top;
    o += fmt::format(
        "<div class=\"band\" style=\"top:{:.0f}px;height:{:.0f}px\"><svg data-part=\"{}\" "
        "data-view=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\" viewBox=\"0 {:.0f} {:.0f} "
        "{:.0f}\">\n{}{}</svg></div>\n",
        top, height, part, view, dr.width, height, top, dr.width, height, edge_bands[k],
        box_bands[k]);
  }
  o += "</div></div>\n";
}

void graph_section(std::string& o, const ReportData& d) {
  // A graph opens collapsed to its layers wherever that draws fewer boxes (a model's step: one
  // box per layer, a recurrent or attention layer's many groups inside it).
  const char* view = d.layers.size() < d.boxes.size() ? "layers" : "groups";
  o += fmt::format(
      "<section id=\"graph\" class=\"view-{}\"><h2>Optimized graph</h2>\n<p>Drawn by "
      "<button data-show=\"layers\">layer</button> (one box per layer name scope) or by "
      "<button data-show=\"groups\">fusion group</button> (one box per fusion group, "
      "labelled with its kernel, and per scope of the ops left unfused); click a layer to open "
      "its groups, a group for its ops.",
      view);
  if (d.timed)
    o += " Colour: share of the measured step time <span class=\"legend\"><span "
         "style=\"background:" +
         heat(0) + "\"></span> 0% <span style=\"background:" + heat(0.25) +
         "\"></span> 25% <span style=\"background:" + heat(1) + "\"></span> 100%</span>.";
  o += "</p>\n";
  for (const auto& part : d.parts) {
    const char* name = report_detail::part_name(part.part);
    o += fmt::format("<h3>{} ({} layers, {} boxes)</h3>\n", name, part.layers.boxes.size(),
                     part.groups.boxes.size());
    drawing(o, d, d.layers, part.layers, name, "layers");
    drawing(o, d, d.boxes, part.groups, name, "groups");
  }
  o += "<h3>Boxes</h3><div id=\"details\">\n";
  for (const Box& b : d.boxes) {
    o += fmt::format(
        "<details id=\"detail-{}\" data-detail-of=\"{}\"><summary>{} ({}, {}{})"
        "</summary><div>{}{}</div><table><tr><th>value</th><th>op</th><th>type</th>"
        "<th>name</th></tr>",
        b.id, b.id, esc(b.label), report_detail::part_name(b.part), esc(b.kind),
        d.timed ? ", " + ms(b.ns) + " ms" : "",
        b.location.empty() ? "" : "source: " + esc(b.location) + ". ",
        b.scope.empty() ? "" : "scope: " + esc(b.scope));
    for (const auto& op : b.ops)
      o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", esc(op.value),
                       esc(op.op), esc(op.type), esc(op.name));
    o += "</table></details>\n";
  }
  o += "</div></section>\n";
}

void memory_section(std::string& o, const ReportData& d) {
  o += fmt::format(
      "<section id=\"memory\" data-arena-bytes=\"{}\" data-lower-bound-bytes=\"{}\"><h2>Memory "
      "plan</h2>\n<p>The arena of one call: {} ({} planned values, lower bound {}; the "
      "scratch area from offset {} holds each step's contraction product and kernel "
      "temporaries). x: step (program position of the node), y: arena offset; one rectangle per "
      "buffer over its lifetime (orange: returned to the caller; purple: scratch).</p>\n",
      d.arena_bytes, d.lower_bound_bytes, codegen::format_bytes(d.arena_bytes),
      codegen::format_bytes(d.planned_bytes), codegen::format_bytes(d.lower_bound_bytes),
      d.scratch_offset);
  const double left = 70, top = 10, plot_w = 1000, plot_h = 480;
  const double positions = double(d.num_steps + 2);  // -1 .. num_steps
  const double arena = double(std::max<size_t>(d.arena_bytes, 1));
  auto xs = [&](int step) { return left + double(step + 1) * plot_w / positions; };
  auto ys = [&](size_t offset) { return top + double(offset) * plot_h / arena; };
  auto hs = [&](size_t bytes) { return std::max(1.0, double(bytes) * plot_h / arena); };
  o += fmt::format(
      "<div class=\"scroll\"><svg id=\"memory-timeline\" "
      "width=\"{:.0f}\" height=\"{:.0f}\">\n",
      left + plot_w + 20, top + plot_h + 40);
  o += fmt::format(
      "<line class=\"axis\" x1=\"{0:.0f}\" y1=\"{1:.0f}\" x2=\"{0:.0f}\" "
      "y2=\"{2:.0f}\"/><line class=\"axis\" x1=\"{0:.0f}\" y1=\"{2:.0f}\" "
      "x2=\"{3:.0f}\" y2=\"{2:.0f}\"/>\n",
      left, top, top + plot_h, left + plot_w);
  for (int i = 0; i <= 4; ++i) {
    size_t off = size_t(arena * i / 4);
    o += fmt::format("<text x=\"2\" y=\"{:.0f}\">{}</text>\n", ys(off) + 4,
                     codegen::format_bytes(off));
  }
  const int tick = std::max(1, (d.num_steps + 9) / 10);
  for (int s = 0; s <= d.num_steps; s += tick)
    o += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\">{}</text>\n", xs(s), top + plot_h + 16, s);
  o += fmt::format("<text x=\"{:.0f}\" y=\"{:.0f}\">step</text>\n", left + plot_w / 2,
                   top + plot_h + 34);
  if (d.scratch_offset < d.arena_bytes)
    o += fmt::format(
        "<line class=\"bound\" x1=\"{0:.0f}\" y1=\"{1:.1f}\" x2=\"{2:.0f}\" "
        "y2=\"{1:.1f}\" style=\"stroke:#6c3483\"><title>scratch area from {3}"
        "</title></line>\n",
        left, ys(d.scratch_offset), left + plot_w, d.scratch_offset);
  o += fmt::format(
      "<line class=\"bound\" x1=\"{0:.0f}\" y1=\"{1:.1f}\" x2=\"{2:.0f}\" "
      "y2=\"{1:.1f}\"><title>lower bound {3}</title></line>\n",
      left, ys(d.lower_bound_bytes), left + plot_w, codegen::format_bytes(d.lower_bound_bytes));
  for (const Buffer& b : d.buffers) {
    if (!b.in_arena) continue;
    std::string views;
    for (const std::string& v : b.views) views += (views.empty() ? "\nviews: " : ", ") + v;
    o += fmt::format(
        "<rect class=\"buf{}\" data-buffer=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
        "height=\"{:.1f}\"><title>{} {} by {}\n{} B @ {}, steps [{}, {}]{}</title></rect>\n",
        b.last_step >= d.num_steps ? " out" : "", esc(b.value), xs(b.first_step), ys(b.offset),
        std::max(1.0, xs(b.last_step + 1) - xs(b.first_step)), hs(b.size), esc(b.value),
        esc(b.type), esc(b.producer), b.size, b.offset, b.first_step, b.last_step, esc(views));
  }
  for (size_t i = 0; i < d.scratch.size(); ++i) {
    const auto& s = d.scratch[i];
    int at = std::max(s.node_step, 0);
    o += fmt::format(
        "<rect class=\"scr\" data-scratch=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"{:.1f}\"><title>{} of {}: {}, {} B @ {}"
        "</title></rect>\n",
        i, xs(at), ys(s.offset), std::max(1.0, xs(at + 1) - xs(at)), hs(s.size), esc(s.role),
        esc(s.step), esc(s.type), s.size, s.offset);
  }
  o += "</svg></div>\n<h3>Outside the arena</h3><p>Parameters are the caller's buffers; a "
       "variable marked donated is updated in place: its new value is written into the "
       "variable's own buffer when the caller donates it.</p>\n";
  const size_t outside = size_t(std::count_if(d.buffers.begin(), d.buffers.end(),
                                              [](const Buffer& b) { return !b.in_arena; }));
  size_t emitted = 0;
  o += sortable_table("outside-table", outside);
  o += "<thead><tr><th>value</th><th>kind</th><th>type</th><th class=\"n\">bytes</th>"
       "<th>lifetime</th><th>written by</th><th>donated</th><th>also holds</th></tr></thead>"
       "<tbody>\n";
  for (const Buffer& b : d.buffers) {
    if (b.in_arena) continue;
    std::string views;
    for (const std::string& v : b.views) views += (views.empty() ? "" : ", ") + v;
    o += fmt::format(
        "<tr data-buffer=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td class=\"n\" "
        "data-v=\"{}\">{}</td><td>[{}, {}]</td><td>{}</td><td>{}</td><td>{}</td>"
        "</tr>\n",
        esc(b.value), esc(b.value), esc(b.kind), esc(b.type), b.size, b.size, b.first_step,
        b.last_step, esc(b.producer), b.donated ? "donated" : "", esc(views));
    o += after_row(emitted, outside);
  }
  o += "</tbody></table></section>\n";
}

// A step's fraction of the machine's limit: of the FMA peak when it computes (flops), else of
// the copy bandwidth; 0 where unknown.
double of_limit(const ReportData& d, double gflops, double gbs) {
  if (gflops > 0) return d.timing.peak_gflops > 0 ? gflops / d.timing.peak_gflops : 0;
  return gbs > 0 && d.timing.copy_gbs > 0 ? gbs / d.timing.copy_gbs : 0;
}

void kernel_section(std::string& o, const ReportData& d) {
  o += "<section id=\"kernels\"><h2>Steps and kernels</h2>\n<p>One row per step of the "
       "executable, in the order they run (click a heading to sort). Generated kernels are "
       "kiln's JIT code; runtime kernels are the library's compiled C++ (GEMM engine, eager "
       "kernels).";
  if (d.timed && d.timing.peak_gflops > 0)
    o += fmt::format(
        " Of limit: a step that computes against the machine's float32 FMA peak ({:.1f} "
        "GFLOP/s), one that only moves data against its copy bandwidth beyond the caches "
        "({:.1f} GB/s), both measured now; over 100%: its data came from the caches. GB/s "
        "counts each operand read once and each result written once (a slice or gather: as "
        "much of its input as it selects).",
        d.timing.peak_gflops, d.timing.copy_gbs);
  size_t rows = d.steps.size(), emitted = 0;
  for (const auto& r : d.steps) rows += r.nested.size();
  o += "</p>\n" + sortable_table("kernel-table", rows);
  o += "<thead><tr><th class=\"n\">#</th>"
       "<th>name</th><th>kind</th><th>shape</th><th class=\"n\">ms</th><th class=\"n\">share"
       "</th><th class=\"n\">GFLOP/s</th><th class=\"n\">of limit</th><th class=\"n\">GB/s</th>"
       "</tr></thead><tbody>\n";
  for (const auto& r : d.steps) {
    const double share = share_of(d, r.ns);
    const double gflops = d.timed && r.ns > 0 && r.flops > 0 ? r.flops / double(r.ns) : 0;
    const double gbs = d.timed && r.ns > 0 && r.bytes > 0 ? r.bytes / double(r.ns) : 0;
    auto num = [](double v, const char* f) {
      return v > 0 ? fmt::format("<td class=\"n\" data-v=\"{}\">{}</td>", v,
                                 fmt::format(fmt::runtime(f), v))
                   : std::string("<td class=\"n\" data-v=\"0\">-</td>");
    };
    o += fmt::format(
        "<tr data-step=\"{}\"{}{}><td class=\"n\" data-v=\"{}\">{}</td><td>{}</td>"
        "<td>{}</td><td>{}</td>",
        r.index, d.timed ? fmt::format(" data-ns=\"{}\"", r.ns) : "",
        r.box.empty() ? "" : " data-box-of=\"" + r.box + "\"", r.index, r.index, esc(r.name),
        esc(r.kind), esc(r.shape));
    o += d.timed ? fmt::format("<td class=\"n\" data-v=\"{}\">{}</td>", r.ns, ms(r.ns))
                 : std::string("<td class=\"n\" data-v=\"0\">-</td>");
    o += num(100 * share, "{:.1f}%") + num(gflops, "{:.2f}") +
         num(100 * of_limit(d, gflops, gbs), "{:.0f}%") + num(gbs, "{:.2f}") + "</tr>\n" +
         after_row(emitted, rows);
    // A cond / while step's body steps, inside its time (not added to the step's total).
    for (size_t i = 0; i < r.nested.size(); ++i) {
      const NestedStepTime& n = r.nested[i];
      const double nf = n.ns > 0 && n.flops > 0 ? n.flops / double(n.ns) : 0;
      const double nb = n.ns > 0 && n.bytes > 0 ? n.bytes / double(n.ns) : 0;
      o += fmt::format(
          "<tr class=\"nested\" data-nested-of=\"{}\"><td class=\"n\" data-v=\"{}\"></td>"
          "<td>\u21b3 {} \u00d7{:.4g}</td><td>{} (body of {})</td><td></td><td class=\"n\" "
          "data-v=\"{}\">{}</td>",
          r.index, double(r.index) + double(i + 1) / double(r.nested.size() + 1), esc(n.name),
          n.runs, esc(category_kind(n.category)), esc(r.name), n.ns, ms(n.ns));
      o += num(100 * share_of(d, n.ns), "{:.1f}%") + num(nf, "{:.2f}") +
           num(100 * of_limit(d, nf, nb), "{:.0f}%") + num(nb, "{:.2f}") + "</tr>\n" +
           after_row(emitted, rows);
    }
  }
  o += "</tbody>";
  if (d.timed)
    o += fmt::format(
        "<tfoot><tr id=\"overhead-row\" data-ns=\"{}\"><td></td><td>runtime between "
        "steps</td><td></td><td></td><td class=\"n\">{}</td><td class=\"n\">{:.1f}%"
        "</td><td></td><td></td><td></td></tr><tr><td></td><td><b>step</b></td><td>"
        "</td><td></td><td class=\"n\"><b>{}</b></td><td class=\"n\">100.0%</td><td>"
        "</td><td></td><td></td></tr></tfoot>",
        d.timing.overhead_ns, ms(d.timing.overhead_ns), 100 * share_of(d, d.timing.overhead_ns),
        ms(d.timing.step_ns));
  o += "</table></section>\n";
}

// Eager against compiled: each call's step time in both modes, each result's difference.
void comparison_section(std::string& o, const ModeComparison& c) {
  o += fmt::format(
      "<section id=\"comparison\" data-speedup=\"{:.4f}\"><h2>Eager against compiled</h2>\n"
      "<p>compare_modes on the same step from the same variables: median step {:.3f} ms eager, "
      "{:.3f} ms compiled (speedup {:.2f}x), compile time {:.3f} s ({} kernels, {} from the "
      "caches), peak tensor memory {} eager, {} compiled.</p>\n",
      c.speedup(), c.eager.median() * 1e3, c.compiled.median() * 1e3, c.speedup(),
      c.compile_seconds, c.kernels, c.kernels_from_caches,
      codegen::format_bytes(size_t(std::max<int64_t>(c.eager_peak_bytes, 0))),
      codegen::format_bytes(size_t(std::max<int64_t>(c.compiled_peak_bytes, 0))));
  // Step times per call: x the call, y milliseconds.
  const double left = 60, top = 10, w = 700, h = 200;
  double most = 0;
  size_t calls = std::max(c.eager.step_seconds.size(), c.compiled.step_seconds.size());
  for (double t : c.eager.step_seconds) most = std::max(most, t);
  for (double t : c.compiled.step_seconds) most = std::max(most, t);
  most = most > 0 ? most * 1e3 * 1.1 : 1;
  auto xs = [&](size_t i) {
    return left + (double(i) + 0.5) * w / double(std::max<size_t>(calls, 1));
  };
  auto ys = [&](double ms) { return top + h - ms / most * h; };
  o += fmt::format(
      "<h3>Step time per call</h3><svg id=\"comparison-times\" width=\"{:.0f}\" "
      "height=\"{:.0f}\"><line class=\"axis\" x1=\"{:.0f}\" y1=\"{:.0f}\" "
      "x2=\"{:.0f}\" y2=\"{:.0f}\"/><line class=\"axis\" x1=\"{:.0f}\" "
      "y1=\"{:.0f}\" x2=\"{:.0f}\" y2=\"{:.0f}\"/><text x=\"2\" y=\"{:.0f}\">{:.2f} "
      "ms</text><text x=\"2\" y=\"{:.0f}\">0</text><text x=\"{:.0f}\" "
      "y=\"{:.0f}\">call</text>\n",
      left + w + 120, top + h + 36, left, top, left, top + h, left, top + h, left + w, top + h,
      top + 4, most, top + h, left + w / 2, top + h + 28);
  const std::pair<const char*, const ModeTimes*> modes[] = {{"eager", &c.eager},
                                                            {"compiled", &c.compiled}};
  for (const auto& [mode, times] : modes) {
    const char* colour = std::string_view(mode) == "eager" ? "#c0392b" : "#2471a3";
    std::string points;
    for (size_t i = 0; i < times->step_seconds.size(); ++i)
      points += fmt::format("{:.1f},{:.1f} ", xs(i), ys(times->step_seconds[i] * 1e3));
    o += fmt::format(
        "<polyline data-mode=\"{}\" points=\"{}\" fill=\"none\" stroke=\"{}\"/>"
        "<line x1=\"{:.0f}\" x2=\"{:.0f}\" y1=\"{:.1f}\" y2=\"{:.1f}\" "
        "stroke=\"{}\" stroke-dasharray=\"4 3\"><title>{} median {:.3f} ms"
        "</title></line><text x=\"{:.0f}\" y=\"{:.1f}\" fill=\"{}\">{} {:.3f} ms"
        "</text>\n",
        mode, points, colour, left, left + w, ys(times->median() * 1e3), ys(times->median() * 1e3),
        colour, mode, times->median() * 1e3, left + w + 6, ys(times->median() * 1e3) + 4, colour,
        mode, times->median() * 1e3);
  }
  o += "</svg>\n";
  // Differences: one bar per result, the largest relative difference on a log scale.
  const double bar_w = 400, row_h = 18, label_w = 260;
  o += fmt::format(
      "<h3>Differences after one step</h3><p>Largest relative difference "
      "|eager - compiled| / max(|eager|, |compiled|) of each output and assigned "
      "variable, on a log scale from 1e-16 to 1.</p><svg id=\"comparison-diffs\" "
      "width=\"{:.0f}\" height=\"{:.0f}\">\n",
      label_w + bar_w + 220, row_h * double(c.differences.size()) + 10);
  for (size_t i = 0; i < c.differences.size(); ++i) {
    const ResultDifference& r = c.differences[i];
    const bool bad = r.nonfinite_mismatches > 0 || !r.note.empty() || !std::isfinite(r.max_rel);
    double frac = r.max_rel > 0 && std::isfinite(r.max_rel)
                      ? std::clamp((std::log10(r.max_rel) + 16) / 16, 0.0, 1.0)
                      : (bad ? 1.0 : 0.0);
    double y = 4 + row_h * double(i);
    o += fmt::format(
        "<g data-result=\"{}\"><text x=\"0\" y=\"{:.0f}\">{}</text><rect "
        "x=\"{:.0f}\" y=\"{:.0f}\" width=\"{:.1f}\" height=\"{:.0f}\" "
        "fill=\"{}\"/><text x=\"{:.0f}\" y=\"{:.0f}\">rel {:.3g}, abs {:.3g}{}"
        "</text></g>\n",
        esc(r.name), y + 12, esc(shorten(r.name, 40)), label_w, y + 2, std::max(1.0, frac * bar_w),
        row_h - 4, bad ? "#c0392b" : "#5dade2", label_w + bar_w + 6, y + 12, r.max_rel, r.max_abs,
        bad ? esc(fmt::format(", {} non-finite {}", r.nonfinite_mismatches, r.note))
            : std::string());
  }
  o += "</svg></section>\n";
}

}  // namespace

namespace report_detail {

std::string render_html(const ReportData& d) {
  std::string o;
  o += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kiln report: " +
       esc(d.title) + "</title>\n<style>" + kCss + "</style>\n<script>" + kEarlyScript +
       "</script>\n</head><body>\n";
  o += "<h1>kiln report: " + esc(d.title) + "</h1>\n<pre id=\"console-errors\" hidden></pre>\n";
  figures(o, d);
  graph_section(o, d);
  memory_section(o, d);
  kernel_section(o, d);
  if (d.compared) comparison_section(o, d.comparison);
  o += "<script>" + std::string(kScript) + "</script>\n</body></html>\n";
  return o;
}

}  // namespace report_detail

std::string report_html(const CompiledForm& form, const ReportOptions& options) {
  ReportData d = report_detail::build_report_data(form, options.title, options.timing);
  if (options.comparison != nullptr) {
    d.compared = true;
    d.comparison = *options.comparison;
  }
  return report_detail::render_html(d);
}

}  // namespace kiln

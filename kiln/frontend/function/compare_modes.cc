#include "kiln/frontend/function/compare_modes.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/frontend/ops.h"
#include "kiln/runtime/array.h"
#include "kiln/runtime/reference_executor.h"

namespace kiln {
namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = p * double(v.size() - 1);
  size_t lo = size_t(pos), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

// A tensor with its own copy of `t`'s bytes (nothing else holds them, so a compiled step may
// update a variable given this value in place without touching the snapshot).
Tensor deep_copy(const Tensor& t) {
  runtime::Array a = runtime::Array::empty(t.type());
  if (a.nbytes() > 0) std::memcpy(a.raw(), t.array().raw(), a.nbytes());
  return Tensor(std::move(a));
}

std::vector<double> as_doubles(const Tensor& t) {
  Tensor d = t.dtype() == DType::f64 ? t : cast(t, DType::f64);
  return d.to_vector<double>();
}

ResultDifference difference(std::string name, const Tensor& eager, const Tensor& compiled) {
  ResultDifference d;
  d.name = std::move(name);
  d.type = eager.type();
  if (!(eager.type() == compiled.type())) {
    d.max_abs = d.max_rel = std::numeric_limits<double>::infinity();
    d.note = fmt::format("eager {} vs compiled {}", eager.type().to_string(),
                         compiled.type().to_string());
    return d;
  }
  std::vector<double> a = as_doubles(eager), b = as_doubles(compiled);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i]) || !std::isfinite(b[i])) {
      bool same = (std::isnan(a[i]) && std::isnan(b[i])) || a[i] == b[i];
      d.nonfinite_mismatches += !same;
      continue;
    }
    double diff = std::abs(a[i] - b[i]);
    double scale = std::max(std::abs(a[i]), std::abs(b[i]));
    d.max_abs = std::max(d.max_abs, diff);
    if (scale > 0) d.max_rel = std::max(d.max_rel, diff / scale);
  }
  return d;
}

// The first step's results (outputs, then the assigned variables' new values) with every
// bf16 value of the traced graph evaluated in float32, from the variables' starting values.
std::vector<Tensor> float32_run(const ConcreteFunction& cf, const std::vector<VariableUse>& vars,
                                const std::vector<Tensor>& snapshot,
                                const std::vector<Tensor>& tensors) {
  std::vector<runtime::Array> args, values;
  for (const Tensor& t : tensors) args.push_back(t.array());
  for (const Tensor& t : snapshot) values.push_back(deep_copy(t).array());
  runtime::ReferenceOptions options;
  options.widen_bf16 = true;
  std::vector<Tensor> out;
  for (runtime::Array& a : runtime::execute_reference(cf.graph(), args, values, options))
    out.emplace_back(std::move(a));
  for (size_t i = 0; i < vars.size(); ++i)
    if (vars[i].written) out.emplace_back(values[i]);
  return out;
}

// The largest |a - f| / max(|a|, |f|) over the elements finite in both and not both zero.
double relative_to(const Tensor& a, const Tensor& f) {
  std::vector<double> x = as_doubles(a), y = as_doubles(f);
  double r = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const double scale = std::max(std::abs(x[i]), std::abs(y[i]));
    if (std::isfinite(x[i]) && std::isfinite(y[i]) && scale > 0)
      r = std::max(r, std::abs(x[i] - y[i]) / scale);
  }
  return r;
}

struct ModeRun {
  std::vector<Tensor> first;  // outputs, then the assigned variables' new values
  ModeTimes times;
  int64_t peak_bytes = 0;
};

}  // namespace

double ModeTimes::median() const { return percentile(step_seconds, 0.5); }
double ModeTimes::p10() const { return percentile(step_seconds, 0.1); }
double ModeTimes::p90() const { return percentile(step_seconds, 0.9); }

double ModeComparison::speedup() const {
  double c = compiled.median();
  return c > 0 ? eager.median() / c : 0.0;
}

std::string ModeComparison::to_string() const {
  auto ms = [](double s) { return fmt::format("{:.3f} ms", s * 1e3); };
  auto mib = [](int64_t b) { return fmt::format("{:.2f} MiB", double(b) / (1 << 20)); };
  std::vector<std::vector<std::string>> rows = {
      {"", "eager", "compiled"},
      {"step time (median)", ms(eager.median()), ms(compiled.median())},
      {"step time (p10 - p90)", ms(eager.p10()) + " - " + ms(eager.p90()),
       ms(compiled.p10()) + " - " + ms(compiled.p90())},
      {"speedup", "1.00x", fmt::format("{:.2f}x", speedup())},
      {"compile time", "-",
       fmt::format("{:.1f} ms ({} of {} kernels from caches)", compile_seconds * 1e3,
                   kernels_from_caches, kernels)},
      {"arena", "-", mib(int64_t(arena_bytes))},
      {"peak tensor memory", mib(eager_peak_bytes), mib(compiled_peak_bytes)},
  };
  std::vector<size_t> width(3, 0);
  for (const auto& r : rows)
    for (size_t c = 0; c < 3; ++c) width[c] = std::max(width[c], r[c].size());
  std::string s =
      fmt::format("{}: eager vs compiled, {} timed steps each\n", name, eager.step_seconds.size());
  for (const auto& r : rows)
    s += fmt::format("{:<{}}  {:>{}}  {:>{}}\n", r[0], width[0], r[1], width[1], r[2], width[2]);
  s += "differences after the first step (max |eager - compiled|, max relative):\n";
  size_t name_width = 0, type_width = 0;
  for (const ResultDifference& d : differences) {
    name_width = std::max(name_width, d.name.size());
    type_width = std::max(type_width, d.type.to_string().size());
  }
  for (const ResultDifference& d : differences) {
    s += fmt::format("  {:<{}}  {:<{}}  abs {:<9.3g}  rel {:.3g}", d.name, name_width,
                     d.type.to_string(), type_width, d.max_abs, d.max_rel);
    if (d.nonfinite_mismatches > 0)
      s += fmt::format("  ({} elements non-finite in one mode only)", d.nonfinite_mismatches);
    if (!d.note.empty()) s += "  (" + d.note + ")";
    if (d.eager_vs_float32 >= 0)
      s += fmt::format("  vs float32: eager rel {:.3g}, compiled rel {:.3g}", d.eager_vs_float32,
                       d.compiled_vs_float32);
    s += "\n";
  }
  return s;
}

namespace detail {

ModeComparison compare_concrete(const CompareOptions& options, const ConcreteFunction& cf,
                                const std::vector<Tensor>& tensors,
                                const std::function<std::vector<Tensor>()>& eager,
                                const std::function<std::vector<Tensor>()>& compiled) {
  if (options.steps < 1 || options.warmup < 0)
    throw Error(
        fmt::format("compare_modes: steps must be >= 1 and warmup >= 0, got steps {} and warmup {}",
                    options.steps, options.warmup));
  const std::vector<VariableUse> vars = cf.variables();
  std::vector<Tensor> snapshot;
  for (const VariableUse& v : vars) snapshot.push_back(deep_copy(v.variable.value()));
  auto restore = [&] {
    for (size_t i = 0; i < vars.size(); ++i)
      Variable(vars[i].variable).assign(deep_copy(snapshot[i]));
  };

  ModeComparison out;
  out.name = options.name;
  CompiledForm form = cf.compiled_form(tensors);
  out.compile_seconds = form.compile_seconds();
  out.kernels = int(form.kernels().size());
  for (const KernelForm& k : form.kernels()) out.kernels_from_caches += k.source != "compiled";
  out.arena_bytes = form.arena_bytes();

  auto run_mode = [&](const std::function<std::vector<Tensor>()>& call) {
    ModeRun r;
    restore();
    const int64_t live_before = runtime::Storage::live_bytes();
    runtime::Storage::reset_peak_bytes();
    for (const Tensor& t : call()) r.first.push_back(deep_copy(t));
    for (const VariableUse& v : vars)
      if (v.written) r.first.push_back(deep_copy(v.variable.value()));
    for (int i = 0; i < options.warmup; ++i) call();
    for (int i = 0; i < options.steps; ++i) {
      auto start = std::chrono::steady_clock::now();
      call();
      r.times.step_seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    r.peak_bytes = runtime::Storage::peak_bytes() - live_before;
    return r;
  };
  ModeRun e, c;
  try {
    e = run_mode(eager);
    c = run_mode(compiled);
  } catch (...) {
    restore();
    throw;
  }
  restore();

  out.eager = e.times;
  out.compiled = c.times;
  out.eager_peak_bytes = e.peak_bytes;
  out.compiled_peak_bytes = c.peak_bytes;
  std::vector<std::string> names;
  const size_t n_outputs = cf.output_types().size();
  for (size_t i = 0; i < n_outputs; ++i) names.push_back(fmt::format("output {}", i));
  for (const VariableUse& v : vars)
    if (v.written) names.push_back("variable " + v.variable.name());
  if (e.first.size() != names.size() || c.first.size() != names.size())
    throw Error(fmt::format(
        "compare_modes: \"{}\" returned {} tensors eagerly and {} compiled; the traced graph "
        "has {} outputs",
        options.name, e.first.size() - (names.size() - n_outputs),
        c.first.size() - (names.size() - n_outputs), n_outputs));
  for (size_t i = 0; i < names.size(); ++i)
    out.differences.push_back(difference(names[i], e.first[i], c.first[i]));
  const bool has_bf16 = std::any_of(e.first.begin(), e.first.end(),
                                    [](const Tensor& t) { return t.dtype() == DType::bf16; });
  if (has_bf16) {
    const std::vector<Tensor> f = float32_run(cf, vars, snapshot, tensors);
    for (size_t i = 0; i < names.size() && i < f.size(); ++i) {
      ResultDifference& d = out.differences[i];
      if (e.first[i].dtype() != DType::bf16 || e.first[i].shape() != f[i].shape()) continue;
      d.eager_vs_float32 = relative_to(e.first[i], f[i]);
      if (c.first[i].type() == e.first[i].type())
        d.compiled_vs_float32 = relative_to(c.first[i], f[i]);
    }
  }
  out.eager_results = std::move(e.first);
  out.compiled_results = std::move(c.first);
  if (options.print_to) *options.print_to << out.to_string() << std::flush;
  return out;
}

}  // namespace detail
}  // namespace kiln

// The victim of the kill tests (tests/crash/*_kill_test.cc): writes files in a loop, reporting
// each completed write on stdout, until it is SIGKILLed at a random moment.
//
//   kiln_crash_writer checkpoint PATH [N]
//     A small Sequential model whose weights are all equal to a generation number g is saved
//     by ModelCheckpoint to PATH (safetensors) for g = G+1, G+2, ... (G: the generation PATH
//     holds, or 0), printing "saved g" after each; stops after N saves if N is given.
//   kiln_crash_writer cache DIR BEGIN END [DIE_AT]
//     Graphs BEGIN..END-1 (each its own kernel: tanh(x * c) + c, c depending on the graph) are
//     compiled with the disk cache in DIR and run; each prints "graph i compiled=m disk=h
//     corrupt=c ok" (the cache counters of that graph) or "graph i WRONG ..." (exit code 3).
//     At the end it prints "file syscalls n" (see below).
// Both print "ready" once set up. Exit code 2: bad usage or an error (printed on stderr).
//
// A kill at a random moment rarely lands inside a cache store (compiling takes far longer), so
// DIE_AT > 0 makes the process SIGKILL itself at its DIE_AT-th file-writing system call
// (write() to a file other than stdout/stderr, fsync(), rename()), in the middle of it: a
// write() writes half of its bytes first. The definitions below interpose the C library's for
// kiln's code linked into this program.
#include <fmt/format.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kiln/codegen/compile_graph.h"
#include "kiln/codegen/object_cache.h"
#include "kiln/ir/parser.h"
#include "kiln/keras/io/safetensors.h"
#include "kiln/kiln.h"
#include "kiln/passes/pipeline.h"

namespace {

std::atomic<long> die_at{0};
std::atomic<long> file_syscalls{0};

// Counts a file-writing system call; true when the process must die in it.
bool dies_now() { return file_syscalls.fetch_add(1) + 1 == die_at.load(); }

void die() {
  ::kill(::getpid(), SIGKILL);
  for (;;) ::pause();
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buffer, size_t n) {
  if (fd > 2 && dies_now()) {
    ::syscall(SYS_write, fd, buffer, n / 2);
    die();
  }
  return ::syscall(SYS_write, fd, buffer, n);
}

extern "C" int fsync(int fd) {
  if (dies_now()) die();
  return int(::syscall(SYS_fsync, fd));
}

extern "C" int rename(const char* from, const char* to) {
  if (dies_now()) die();
  return int(::syscall(SYS_rename, from, to));
}

namespace {

// Unbuffered, so that a line printed is in the pipe before the next write starts.
void say(const std::string& line) {
  std::string text = line + "\n";
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(1, text.data() + done, text.size() - done);
    if (n <= 0) std::_Exit(2);
    done += size_t(n);
  }
}

int run_checkpoint(const std::string& path, long limit) {
  using namespace kiln;
  Sequential model({Dense(96), Dense(32)}, /*input_shape=*/Shape{96});
  double generation = 0;
  if (std::filesystem::exists(path))
    generation = load_safetensors(path).at(0).second.data<float>()[0];
  ModelCheckpoint checkpoint(path);
  checkpoint.set_model(&model.get());
  say("ready");
  for (long saved = 0; limit == 0 || saved < limit; ++saved) {
    generation += 1;
    for (Variable v : model->weights()) v.assign(full(v.value().shape(), generation));
    checkpoint.on_epoch_end(int(generation) - 1, {});
    say(fmt::format("saved {}", generation));
  }
  return 0;
}

// The graph of index i and its constant.
double graph_constant(long i) { return 0.5 + double(i) / 1024.0; }
std::string graph_text(long i) {
  return fmt::format(R"(graph @crash{}(%0: f32[256]) -> (f32[256]) {{
  %1 = constant dense<{}> : f32[]
  %2 = mul(%0, %1) : f32[256]
  %3 = tanh(%2) : f32[256]
  %4 = add(%3, %1) : f32[256]
  return %4
}})",
                     i, graph_constant(i));
}

int run_cache(const std::string& dir, long begin, long end, long die_at_call) {
  using namespace kiln;
  die_at = die_at_call;
  codegen::set_cache_dir(dir);
  runtime::Array x = runtime::Array::empty(TensorType{DType::f32, Shape{256}});
  auto* px = static_cast<float*>(x.raw());
  for (int j = 0; j < 256; ++j) px[j] = float(j - 128) / 64.0f;
  say("ready");
  for (long i = begin; i < end; ++i) {
    codegen::CacheStats before = codegen::cache_stats();
    auto graph = ir::parse_graph(graph_text(i), "crash_writer");
    passes::optimize_pipeline({}).run(*graph);
    auto executable = codegen::compile_graph(*graph);
    std::vector<runtime::Array> variables;
    std::vector<runtime::Array> out = executable->run({&x, 1}, variables);
    codegen::CacheStats after = codegen::cache_stats();
    const double c = graph_constant(i);
    const auto* py = static_cast<const float*>(out.at(0).raw());
    for (int j = 0; j < 256; ++j) {
      double want = std::tanh(double(px[j]) * c) + c;
      if (!(std::abs(double(py[j]) - want) <= 1e-5 * (1 + std::abs(want)))) {
        say(fmt::format("graph {} WRONG at {}: got {}, want {}", i, j, py[j], want));
        return 3;
      }
    }
    say(fmt::format("graph {} compiled={} disk={} corrupt={} ok", i, after.misses - before.misses,
                    after.disk_hits - before.disk_hits, after.corrupt - before.corrupt));
  }
  say(fmt::format("file syscalls {}", file_syscalls.load()));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 2 && args.size() <= 3 && args[0] == "checkpoint")
      return run_checkpoint(args[1], args.size() == 3 ? std::stol(args[2]) : 0);
    if ((args.size() == 4 || args.size() == 5) && args[0] == "cache")
      return run_cache(args[1], std::stol(args[2]), std::stol(args[3]),
                       args.size() == 5 ? std::stol(args[4]) : 0);
  } catch (const std::exception& e) {
    std::cerr << "kiln_crash_writer: " << e.what() << "\n";
    return 2;
  }
  std::cerr << "usage: kiln_crash_writer checkpoint PATH [N] | cache DIR BEGIN END [DIE_AT]\n";
  return 2;
}

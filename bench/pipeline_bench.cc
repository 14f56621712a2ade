// Does prefetch hide the loading time of MNIST-sized batches (issue 20)? A train-like consumer,
// the compiled training step of a Dense 784-128-10 MLP (Sequential::train_on_batch, SGD,
// sparse cross-entropy) on [128, 784] batches, pulls batches from a data::Dataset without and
// with prefetch(2), in one process:
//   Pipeline/SimulatedDecode/T  from_tensor_slices of uint8 images, a map that decodes each
//                               example (cast to float32, / 255) and spins for step/128, so
//                               loading a batch costs a step more (a slow decoder: CPU work,
//                               hidden only where a core is free for the prefetch thread);
//   Pipeline/SimulatedLatency/T a generator of ready batches that sleeps one step before each:
//                               loading that only waits (disk, network), no CPU;
//   Pipeline/MnistFile/T        the lazy MNIST reader (data::mnist_dataset) over a gzip IDX
//                               file of 5,120 random images in a temporary directory (the
//                               real loading cost: gzread, decode, batch).
// T is kiln's thread count for the step (set_num_threads). Counters, per batch, each the median
// of 5 interleaved passes of 24 (or 40) batches: step_ms (the step alone on a ready batch),
// load_ms (the pipeline alone), serial_ms (the loop without prefetch), prefetch_ms (with
// prefetch(2)); x_faster = serial / prefetch; hidden = (serial - prefetch) / load, the fraction
// of the loading time prefetch hid (1: all of it); parallel_ceiling = how many cores the
// process had at the end (two fixed loops one after the other over both at once: 1.0 means
// the prefetch thread had no free core for CPU work, 2.0 one whole core).
// Run: kiln_bench --benchmark_filter=Pipeline
#include <benchmark/benchmark.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <thread>

#include "bench/bench_util.h"
#include "kiln/kiln.h"

namespace {

using namespace kiln;
using data::Dataset;
using data::Element;
using Clock = std::chrono::steady_clock;

constexpr int64_t kBatch = 128, kPixels = 784;

Sequential mnist_mlp() {
  clear_session();
  set_random_seed(0);
  Sequential m({Dense(128, {.activation = "relu"}), Dense(10)}, Shape{kPixels});
  m->compile({.optimizer = SGD({.learning_rate = 0.01}),
              .loss = losses::sparse_categorical_crossentropy(true)});
  return m;
}

// Random bytes (a fixed LCG): MNIST-like images of n examples.
std::vector<uint8_t> random_bytes(size_t n) {
  std::vector<uint8_t> v(n);
  uint64_t s = 12345;
  for (auto& b : v) b = uint8_t((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 56);
  return v;
}

std::vector<int64_t> random_labels(int64_t n) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < n; ++i) v.push_back((i * 7) % 10);
  return v;
}

void spin_for(double seconds) {
  auto end = Clock::now() + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
  }
}

// Seconds per batch of one pass; `model` (may be null) trains on every batch.
double per_batch(const Dataset& ds, uint64_t pass, const Sequential* model) {
  auto start = Clock::now();
  int64_t batches = 0;
  Dataset::Iterator it = ds.begin_pass(pass);
  while (std::optional<Element> b = it.next()) {
    if (model) (*model)->train_on_batch(b->x.tensors()[0], b->y.tensors()[0]);
    ++batches;
  }
  return std::chrono::duration<double>(Clock::now() - start).count() / double(batches);
}

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// A fixed amount of arithmetic (about a millisecond).
void busy_work() {
  volatile uint64_t x = 1;
  for (int i = 0; i < 1'000'000; ++i) x = x * 6364136223846793005ull + 1;
}

// How many cores this process gets right now (the shared machine): two busy_work()s one after
// the other over the same two at once (2: a free core for the prefetch thread; 1: none).
double parallel_ceiling() {
  auto serial = [] { busy_work(), busy_work(); };
  auto concurrent = [] {
    std::thread t(busy_work);
    busy_work();
    t.join();
  };
  return bench_util::median_seconds(9, serial) / bench_util::median_seconds(9, concurrent);
}

// Measures `ds` (batches of [128, 784] float32 and [128] int64) under the counters above.
void measure(benchmark::State& state, const Dataset& ds) {
  Sequential model = mnist_mlp();
  Element first = *ds.begin_pass(0).next();
  Tensor x = first.x.tensors()[0], y = first.y.tensors()[0];
  for (int i = 0; i < 3; ++i) model->train_on_batch(x, y);  // trace and compile
  const double step = bench_util::median_seconds(9, [&] { model->train_on_batch(x, y); });
  // Passes 0..4 of each kind, interleaved so that a change in the machine's load hits all
  // three alike.
  Dataset prefetched = ds.prefetch(2);
  std::vector<double> loads, serials, prefetches;
  for (uint64_t pass = 0; pass < 5; ++pass) {
    loads.push_back(per_batch(ds, pass, nullptr));
    serials.push_back(per_batch(ds, pass, &model));
    prefetches.push_back(per_batch(prefetched, pass, &model));
  }
  const double load = median(loads), serial = median(serials), overlapped = median(prefetches);
  for (auto _ : state) per_batch(prefetched, 5, &model);
  state.counters["step_ms"] = step * 1e3;
  state.counters["load_ms"] = load * 1e3;
  state.counters["serial_ms"] = serial * 1e3;
  state.counters["prefetch_ms"] = overlapped * 1e3;
  state.counters["x_faster"] = serial / overlapped;
  state.counters["hidden"] = (serial - overlapped) / load;
  state.counters["parallel_ceiling"] = parallel_ceiling();
}

// The median step time of the MLP on a ready [128, 784] batch (compiled first).
double step_seconds() {
  Sequential m = mnist_mlp();
  Tensor x = random_uniform({kBatch, kPixels}, 1), y = tensor(random_labels(kBatch));
  for (int i = 0; i < 3; ++i) m->train_on_batch(x, y);
  return bench_util::median_seconds(9, [&] { m->train_on_batch(x, y); });
}

// uint8 images of 24 batches decoded to float32 / 255 by a map (eager kiln ops, per example).
Dataset decoded_images() {
  const int64_t n = 24 * kBatch;
  Tensor images = tensor(random_bytes(size_t(n * kPixels)), {n, kPixels});
  return Dataset::from_tensor_slices(images, tensor(random_labels(n))).map([](Element e) {
    return Element{cast(e.x.tensors()[0], DType::f32) * (1.0 / 255.0), e.y};
  });
}

void BM_Pipeline_SimulatedDecode(benchmark::State& state) {
  const int threads_before = num_threads();
  set_num_threads(int(state.range(0)));
  // CPU work: each example also spins for step / 128, so a batch costs about a step more.
  Dataset ds = decoded_images()
                   .map([per_example = step_seconds() / double(kBatch)](Element e) {
                     spin_for(per_example);
                     return e;
                   })
                   .batch(kBatch);
  measure(state, ds);
  set_num_threads(threads_before);
}

void BM_Pipeline_SimulatedLatency(benchmark::State& state) {
  const int threads_before = num_threads();
  set_num_threads(int(state.range(0)));
  // Waiting, not working (a network or disk read): a generator of 24 ready batches that
  // sleeps for one step before each, so loading needs no CPU.
  Element batch{random_uniform({kBatch, kPixels}, 2), tensor(random_labels(kBatch))};
  auto wait = std::chrono::duration<double>(step_seconds());
  Dataset ds = Dataset::from_generator([batch, wait] {
    return [batch, wait, i = 0]() mutable -> std::optional<Element> {
      if (i++ == 24) return std::nullopt;
      std::this_thread::sleep_for(wait);
      return batch;
    };
  });
  measure(state, ds);
  set_num_threads(threads_before);
}

void BM_Pipeline_MnistFile(benchmark::State& state) {
  const int threads_before = num_threads();
  set_num_threads(int(state.range(0)));
  namespace fs = std::filesystem;
  const uint32_t n = 40 * kBatch;
  fs::path dir = fs::temp_directory_path() / ("kiln_pipeline_bench_" + std::to_string(getpid()));
  fs::create_directories(dir);
  auto write_gz = [](const fs::path& p, uint32_t magic, std::vector<uint32_t> dims,
                     const std::vector<uint8_t>& data) {
    std::string b;
    dims.insert(dims.begin(), magic);
    for (uint32_t v : dims)
      for (int s = 24; s >= 0; s -= 8) b += char((v >> s) & 0xff);
    b.append(data.begin(), data.end());
    gzFile f = gzopen(p.string().c_str(), "wb");
    gzwrite(f, b.data(), unsigned(b.size()));
    gzclose(f);
  };
  write_gz(dir / "images.gz", 0x803, {n, 28, 28}, random_bytes(size_t(n) * kPixels));
  std::vector<uint8_t> labels(n);
  for (uint32_t i = 0; i < n; ++i) labels[i] = uint8_t(i % 10);
  write_gz(dir / "labels.gz", 0x801, {n}, labels);
  Dataset ds = data::mnist_dataset((dir / "images.gz").string(), (dir / "labels.gz").string())
                   .map([](Element e) {
                     return Element{reshape(e.x.tensors()[0], {kPixels}), e.y};
                   })
                   .batch(kBatch);
  measure(state, ds);
  fs::remove_all(dir);
  set_num_threads(threads_before);
}

BENCHMARK(BM_Pipeline_SimulatedDecode)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_Pipeline_SimulatedLatency)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK(BM_Pipeline_MnistFile)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->Iterations(3);

}  // namespace

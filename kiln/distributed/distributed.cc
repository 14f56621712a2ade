// kiln::distributed on MPI: joining the world, the all_reduce communicator, host collectives.
#include "kiln/distributed/distributed.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "kiln/distributed/comm_thread.h"
#include "kiln/distributed/mpi_world.h"
#include "kiln/ir/error.h"
#include "kiln/runtime/collectives.h"
#include "kiln/runtime/knobs.h"

namespace kiln::distributed {
namespace {

using detail::mpi_mutex;
using detail::wait;
using detail::world;

class MpiCommunicator : public runtime::Communicator {
 public:
  int rank() const override { return world().rank; }
  int size() const override { return world().size; }
  void all_reduce_sum(void* data, int64_t count, DType dtype, std::string_view what) override {
    check(dtype, what);
    detail::deterministic_sum(world().grads, data, count, dtype == DType::f64, std::string(what));
  }
  std::unique_ptr<runtime::PendingCollective> start_all_reduce_sum(void* data, int64_t count,
                                                                   DType dtype,
                                                                   std::string what) override {
    check(dtype, what);
    return thread_.start(
        [data, count, dtype, what] {
          detail::deterministic_sum(world().grads, data, count, dtype == DType::f64, what);
        },
        count * int64_t(dtype_size(dtype)));
  }

 private:
  static void check(DType dtype, std::string_view what) {
    if (dtype != DType::f32 && dtype != DType::f64)
      throw Error(fmt::format(
          "kiln::distributed: {} has dtype {}; all_reduce sums float32 or float64 tensors (cast "
          "first)",
          what, dtype_name(dtype)));
  }
  detail::CommThread thread_;
};

bool initialized_ = false;

void finalize_at_exit() {
  runtime::set_communicator(nullptr);  // joins the communication thread first
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool launched_by_mpi() { return runtime::knobs::launched_by_mpi(); }

void initialize(const Options& options) {
  detail::World& w = world();
  if (options.timeout_seconds > 0)
    w.timeout = options.timeout_seconds;
  else if (auto t = runtime::knobs::distributed_timeout())
    w.timeout = *t;
  if (initialized_) return;
  initialized_ = true;
  if (!launched_by_mpi()) return;  // a world of one: MPI is never touched
  int already = 0;
  MPI_Initialized(&already);
  if (!already) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED)
      throw Error(
          fmt::format("kiln::distributed: the MPI library gives thread level {}; kiln needs "
                      "MPI_THREAD_SERIALIZED ({}) for its communication thread",
                      provided, int(MPI_THREAD_SERIALIZED)));
    std::atexit(finalize_at_exit);
  }
  // Errors come back as codes (and the deadline in detail::wait stops hung collectives).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &w.size);
  MPI_Comm_dup(MPI_COMM_WORLD, &w.host);
  MPI_Comm_dup(MPI_COMM_WORLD, &w.grads);
  w.mpi = true;
  if (w.size > 1) runtime::set_communicator(std::make_shared<MpiCommunicator>());
}

bool initialized() { return initialized_; }
int rank() { return world().rank; }
int size() { return world().size; }
bool is_output_rank() { return world().rank == 0; }
double timeout_seconds() { return world().timeout; }

void broadcast(void* data, size_t bytes, const std::string& what, int root) {
  const detail::World& w = world();
  if (w.size == 1 || bytes == 0) return;
  if (bytes > size_t(std::numeric_limits<int>::max()))
    throw Error(fmt::format("kiln::distributed: broadcast of {} has {} bytes; the limit is {}",
                            what, bytes, std::numeric_limits<int>::max()));
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    detail::check(MPI_Ibcast(data, int(bytes), MPI_BYTE, root, w.host, &req), what);
  }
  wait(req, "the broadcast of " + what);
}

void all_reduce_sum(double* data, size_t count, const std::string& what) {
  detail::deterministic_sum(world().host, data, int64_t(count), true, what);
}

void all_gather_bytes(const void* mine, const std::vector<int64_t>& bytes_per_rank, void* out,
                      const std::string& what) {
  const detail::World& w = world();
  if (int(bytes_per_rank.size()) != w.size)
    throw Error(fmt::format("kiln::distributed: all_gather of {}: {} sizes for {} ranks", what,
                            bytes_per_rank.size(), w.size));
  std::vector<int> counts, displs;
  int64_t offset = 0;
  for (int64_t b : bytes_per_rank) {
    if (offset + b > std::numeric_limits<int>::max())
      throw Error(fmt::format("kiln::distributed: all_gather of {} exceeds {} bytes", what,
                              std::numeric_limits<int>::max()));
    counts.push_back(int(b));
    displs.push_back(int(offset));
    offset += b;
  }
  const int64_t my = bytes_per_rank[size_t(w.rank)];
  if (w.size == 1) {
    if (my > 0) std::memcpy(out, mine, size_t(my));
    return;
  }
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    detail::check(MPI_Iallgatherv(mine, int(my), MPI_BYTE, out, counts.data(), displs.data(),
                                  MPI_BYTE, w.host, &req),
                  what);
  }
  wait(req, "the all-gather of " + what);
}

std::vector<std::string> all_gather(const std::string& mine, const std::string& what) {
  const detail::World& w = world();
  if (w.size == 1) return {mine};
  std::vector<int64_t> lengths(size_t(w.size));
  int64_t my_length = int64_t(mine.size());
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    detail::check(
        MPI_Iallgather(&my_length, 1, MPI_INT64_T, lengths.data(), 1, MPI_INT64_T, w.host, &req),
        what);
  }
  wait(req, "the all-gather of the lengths of " + what);
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  std::string all(size_t(total), '\0');
  all_gather_bytes(mine.data(), lengths, all.data(), what);
  std::vector<std::string> out;
  int64_t at = 0;
  for (int64_t l : lengths) {
    out.push_back(all.substr(size_t(at), size_t(l)));
    at += l;
  }
  return out;
}

void barrier(const std::string& what) {
  const detail::World& w = world();
  if (w.size == 1) return;
  MPI_Request req;
  {
    std::lock_guard<std::mutex> lock(mpi_mutex());
    detail::check(MPI_Ibarrier(w.host, &req), what);
  }
  wait(req, "the barrier of " + what);
}

void check_same_everywhere(const std::string& description, const std::string& what) {
  if (world().size == 1) return;
  const std::vector<std::string> all = all_gather(description, what);
  for (size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0])
      throw Error(fmt::format(
          "kiln::distributed: the ranks differ in {}: rank 0 has\n  {}\nbut rank {} has\n  {}\n"
          "every rank must be started with the same model, data shapes and options",
          what, all[0], r, all[r]));
}

Shard shard_of(int64_t batch, int rank, int size) {
  const int64_t base = batch / size, extra = batch % size;
  Shard s;
  s.begin = rank * base + std::min<int64_t>(rank, extra);
  s.end = s.begin + base + (rank < extra ? 1 : 0);
  return s;
}

}  // namespace kiln::distributed

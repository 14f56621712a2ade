// The fault cases of data-parallel training, one per run under `mpirun -np 2` (ctest checks the
// output and that the job ends within its timeout; tests/CMakeLists.txt):
//   kiln_distributed_fault hang   the last rank stops answering at the third step (it sleeps):
//                                 rank 0 gives up after KILN_DISTRIBUTED_TIMEOUT seconds with a
//                                 message naming the collective, and stops the job (MPI_Abort);
//   kiln_distributed_fault die    the last rank exits at the third step: the job stops (the
//                                 launcher sees a rank exit without MPI_Finalize);
//   kiln_distributed_fault buckets  the last rank compiles its step with another gradient
//                                 bucket size (each gradient summed alone): at the first step
//                                 every rank throws a kiln::Error naming rank 0's sum and the
//                                 last rank's (the start-up check cannot see the bucket size).
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

#include "kiln/codegen/compile_graph.h"
#include "kiln/kiln.h"

namespace {

class Fault : public kiln::Callback {
 public:
  explicit Fault(std::string kind) : kind_(std::move(kind)) {}
  void on_train_batch_begin(int batch, const kiln::Logs&) override {
    if (batch != 2 || kiln::distributed::rank() != kiln::distributed::size() - 1) return;
    std::fprintf(stderr, "fault: rank %d %s at step %d\n", kiln::distributed::rank(),
                 kind_ == "die" ? "exits" : "hangs", batch);
    std::fflush(stderr);
    if (kind_ == "die") std::_Exit(3);
    ::sleep(3600);
  }

 private:
  std::string kind_;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  const std::string kind = argc == 2 ? argv[1] : "";
  if (kind != "hang" && kind != "die" && kind != "buckets") {
    std::cerr << "usage: kiln_distributed_fault hang|die|buckets\n";
    return 2;
  }
  try {
    distributed::initialize();
    if (kind == "buckets" && distributed::rank() == distributed::size() - 1)
      codegen::set_bucket_bytes(0);
    set_random_seed(1);
    Sequential m({Dense(4, {.activation = "relu"}), Dense(2)}, Shape{3});
    m->compile({.optimizer = "sgd", .loss = losses::sparse_categorical_crossentropy(true)});
    Tensor x = random_normal({64, 3}, 1);
    Tensor y = cast(greater(sum(x, {1}), scalar(0.0f)), DType::i64);
    m->fit(x, y,
           {.batch_size = 8,
            .epochs = 1,
            .verbose = 0,
            .callbacks = {std::make_shared<Fault>(kind)},
            .data_parallel = true});
  } catch (const Error& e) {
    std::cerr << "kiln: error: " << e.what() << "\n";
    return 1;
  }
  std::cout << "fault: finished without a fault\n";
  return 0;
}

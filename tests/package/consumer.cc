// A program built against an installed kiln (find_package and pkg-config; see
// cmake/check_install.cmake): an eager op, a traced and JIT-compiled function, a gradient, the
// shipped data set found through the installed data directory, and a kiln::Error.
#include <cmath>
#include <cstdio>
#include <string>

#include "kiln/keras/data/data_dir.h"
#include "kiln/kiln.h"

int main(int argc, char** argv) {
  using namespace kiln;
  std::printf("kiln %s\n", kVersion);
  // Eager: [[1, 2], [3, 4]] @ [[1], [1]] = [[3], [7]].
  Tensor a = tensor(std::vector<float>{1, 2, 3, 4}, {2, 2});
  Tensor b = tensor(std::vector<float>{1, 1}, {2, 1});
  std::vector<float> eager = matmul(a, b).to_vector<float>();
  // Traced and compiled: relu(x @ b) + 1, and its gradient sum(x * x) -> 2x.
  auto f = function([&](const Tensor& x) { return relu(matmul(x, b)) + 1.0; }, {.name = "f"});
  std::vector<float> compiled = f(a).to_vector<float>();
  Tensor x = tensor(std::vector<float>{0.5f, -2}, {2});
  GradientTape tape;
  tape.watch(x);
  std::vector<float> grad = tape.gradient(sum(x * x), x).to_vector<float>();
  bool ok = eager == std::vector<float>{3, 7} && compiled == std::vector<float>{4, 8} &&
            grad == std::vector<float>{1, -4};
  // A usage error is a kiln::Error with a message.
  try {
    matmul(a, tensor(std::vector<float>{1, 2, 3}, {3, 1}));
    ok = false;
  } catch (const Error& e) {
    ok = ok && std::string(e.what()).find("matmul") != std::string::npos;
  }
  std::printf("data_dir %s\n", data::data_dir().c_str());
  if (argc > 1 && std::string(argv[1]) == "--digits") {
    data::Examples digits = data::load_digits();
    std::printf("digits %lld\n", static_cast<long long>(digits.x.shape()[0]));
    ok = ok && digits.x.shape()[0] == 1797;
  }
  std::printf("%s\n", ok ? "consumer ok" : "consumer FAILED");
  return ok ? 0 : 1;
}

// kiln's .npy and safetensors files as Python sees them: numpy reads what kiln writes, and
// kiln reads what numpy writes (a Fortran-ordered array). Needs Debian's python3-numpy
// (installed by scripts/install-deps.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kiln/keras/io/npy.h"
#include "kiln/keras/io/safetensors.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string script() { return (fs::path(KILN_SOURCE_DIR) / "tests/io/python_check.py").string(); }

TEST(IoPython, NumpyReadsKilnFiles) {
  fs::path dir = fs::temp_directory_path() / "kiln_io_python_read";
  fs::create_directories(dir);
  Tensor kernel = reshape(arange(12, DType::f32), {3, 4}) / 4.0;
  save_npy((dir / "kernel.npy").string(), kernel);
  save_safetensors((dir / "w.safetensors").string(),
                   {{"dense/kernel", kernel},
                    {"dense/bias", tensor<double>({1, -2, 3})},
                    {"step", scalar(7, DType::i64)},
                    {"mask", tensor<bool>({true, false, true})}},
                   {{"format", "kiln"}});
  std::string cmd = "/usr/bin/python3 " + script() + " read " + (dir / "kernel.npy").string() +
                    " " + (dir / "w.safetensors").string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  fs::remove_all(dir);
}

TEST(IoPython, KilnReadsNumpyFortranOrder) {
  fs::path dir = fs::temp_directory_path() / "kiln_io_python_write";
  fs::create_directories(dir);
  std::string path = (dir / "f.npy").string();
  std::string cmd = "/usr/bin/python3 " + script() + " write " + path;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  Tensor t = load_npy(path);
  EXPECT_EQ(t.dtype(), DType::i32);
  EXPECT_EQ(t.shape(), Shape({2, 3}));
  EXPECT_EQ(t.to_vector<int>(), (std::vector<int>{0, 10, 20, 30, 40, 50}));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kiln

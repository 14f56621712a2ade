// Keras 3 .keras files: fixtures made by Keras 3.15 on JAX (tests/saving/keras_files/
// make_fixtures.py; these tests do not need Keras) load into kiln and predict what Keras
// predicted, within a bound derived from float32 rounding; kiln's own .keras files reload bit for
// bit; everything kiln cannot represent is a kiln::Error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "kiln/keras/io/file_util.h"
#include "kiln/keras/io/hdf5_file.h"
#include "kiln/keras/io/zip_archive.h"
#include "kiln/kiln.h"
#include "tests/saving/saving_test_util.h"

namespace kiln {
namespace {

std::string fixture(const std::string& name) {
  return std::string(KILN_SOURCE_DIR) + "/tests/saving/keras_files/" + name;
}

struct Fixture {
  const char* name;
  int inputs;
  // The longest chain of float32 roundings from an input to an output: the terms of every
  // accumulation (dot products, sums, means) along the deepest path, plus a few ulps for each
  // transcendental function (tanh, sigmoid, exp, gelu, rsqrt: kiln's and XLA's approximations
  // differ by up to ~4 ulps each). The bound is 2 * eps * chain * max(1, |y|max): first-order
  // forward error of sums of products of O(1) values (glorot weights, N(0,1) inputs).
  double chain;
};

// mlp: Dense 6 -> 8 (relu) -> 4 (tanh) -> 3: 6 + 8 + 4 terms + tanh 4 ulps.
// two_inputs: Dense 4 -> 5 (relu), 3 -> 5 (sigmoid), concat, add (1), Dense 15 -> 2, softmax
//   (2 terms + exp 4 + division): 4 + 4 + 1 + 15 + 2 + 8.
// lstm_masked: 7 steps, each gate a sum of 6 + 5 terms + bias, sigmoid/tanh 4 ulps each (3
//   gates + 2 tanh), the state carried through all steps: 7 * (12 + 20); then Dense 5 + sigmoid.
// attention: projections (8 terms), scores (4), softmax over 6 (6 + exp), weighted sum (6),
//   output projection (2 * 4), residual (1), layer norm (mean and variance of 8, rsqrt), Dense 8
//   + gelu, mean over 6, Dense 8: 8 + 4 + 10 + 6 + 8 + 1 + 20 + 12 + 6 + 8.
// cnn: Conv 3x3x2 (18) relu, max pool, Conv 3x3x4 (36) relu, Dense 12 -> 5, softmax over 5:
//   18 + 36 + 12 + 5 + 8.
// rnn_cells: RNN(GRUCell(4)) over 5 steps (gates of 3 + 4 terms + 2 biases, 2 sigmoids and a
//   tanh: 9 + 12 per step), then RNN(LSTMCell(3)) backwards over 5 steps (3 + 3 terms + bias, 5
//   functions: 7 + 20 per step), Dense 3 -> 2: 5 * (9 + 12) + 5 * (7 + 20) + 3 + 1.
const Fixture kFixtures[] = {
    {"mlp", 1, 6 + 8 + 4 + 4},
    {"two_inputs", 2, 4 + 4 + 1 + 15 + 2 + 8},
    {"lstm_masked", 1, 7 * (12 + 20) + 5 + 4},
    {"attention", 1, 8 + 4 + 10 + 6 + 8 + 1 + 20 + 12 + 6 + 8},
    {"cnn", 1, 18 + 36 + 12 + 5 + 8},
    {"rnn_cells", 1, 5 * (9 + 12) + 5 * (7 + 20) + 3 + 1},
};

std::vector<Tensor> fixture_inputs(const Fixture& f) {
  std::vector<Tensor> xs;
  for (int i = 0; i < f.inputs; ++i)
    xs.push_back(load_npy(fixture(fmt::format("{}.x{}.npy", f.name, i))));
  return xs;
}

std::vector<float> as_floats(const Tensor& t) { return cast(t, DType::f32).to_vector<float>(); }

// The weights bit for bit (seed-generator states are not in Keras' files: Keras leaves them out).
void expect_same_model_weights(const Model& a, const Model& b) {
  auto wa = a->weights(), wb = b->weights();
  ASSERT_EQ(wa.size(), wb.size());
  for (size_t i = 0; i < wa.size(); ++i)
    test::expect_bitwise_equal(wa[i].value(), wb[i].value(), wa[i].name());
}

class KerasFixture : public ::testing::TestWithParam<Fixture> {};

TEST_P(KerasFixture, LoadsAndPredictsWhatKerasPredicted) {
  const Fixture& f = GetParam();
  Model model = load_model(fixture(std::string(f.name) + ".keras"));
  const Tensor expected = load_npy(fixture(std::string(f.name) + ".y.npy"));
  const Tensor got = model->predict(fixture_inputs(f));
  ASSERT_EQ(got.shape().to_string(), expected.shape().to_string());
  std::vector<float> g = as_floats(got), e = as_floats(expected);
  double magnitude = 1;
  for (float v : e) magnitude = std::max(magnitude, double(std::fabs(v)));
  const double bound = 2 * double(std::numeric_limits<float>::epsilon()) * f.chain * magnitude;
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, std::fabs(double(g[i]) - e[i]));
  EXPECT_LE(worst, bound) << f.name << ": worst difference " << worst;
  RecordProperty("worst_difference", fmt::format("{:.3g} (bound {:.3g})", worst, bound));
  // Compiled with the saved configuration, the optimizer after Keras' one training step.
  ASSERT_TRUE(model->compiled());
  EXPECT_EQ(model->compile_options().optimizer->iterations(), 1);
  EXPECT_FALSE(model->compile_options().optimizer->slots().empty());
}

TEST_P(KerasFixture, SavedByKilnReloadsBitForBit) {
  const Fixture& f = GetParam();
  test::TempDir dir;
  Model model = load_model(fixture(std::string(f.name) + ".keras"));
  const std::string path = dir.path("again.keras");
  model->save(path);
  Model again = load_model(path);
  expect_same_model_weights(model, again);
  const auto& a = model->compile_options().optimizer->slots();
  const auto& b = again->compile_options().optimizer->slots();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    test::expect_bitwise_equal(a[i].variable.value(), b[i].variable.value(), a[i].variable.name());
  EXPECT_EQ(again->compile_options().optimizer->iterations(), 1);
  test::expect_bitwise_equal(model->predict(fixture_inputs(f)), again->predict(fixture_inputs(f)),
                             "predictions");
}

INSTANTIATE_TEST_SUITE_P(KerasFiles, KerasFixture, ::testing::ValuesIn(kFixtures),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(KerasFile, ModelBuiltInKilnRoundTripsAndKeepsTraining) {
  set_random_seed(3);
  Model model =
      Sequential({Dense(6, {.activation = "relu"}), BatchNormalization(), Dense(2)}, Shape{4});
  model->compile({.optimizer = Adam({.learning_rate = 0.01, .amsgrad = true}),
                  .loss = losses::sparse_categorical_crossentropy(true)});
  Tensor x = random_normal({16, 4}, 7);
  Tensor y = cast(greater(sum(x, {1}), zeros({16})), DType::i64);
  model->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  test::TempDir dir;
  model->save(dir.path("m.keras"));
  Model again = load_model(dir.path("m.keras"));
  test::expect_same_variables(model, again);
  test::expect_bitwise_equal(model->predict(x), again->predict(x), "predictions");
  // Training goes on from the restored slots exactly as it would have.
  model->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  again->fit(x, y, {.batch_size = 8, .epochs = 1, .verbose = 0});
  test::expect_same_variables(model, again);
}

TEST(KerasFile, SaveReplacesAFileAtomicallyAndRespectsOverwrite) {
  test::TempDir dir;
  Model model = load_model(fixture("mlp.keras"));
  const std::string path = dir.path("m.keras");
  model->save(path);
  model->save(path);  // replaces it
  EXPECT_THROW(model->save(path, {.overwrite = false}), Error);
  std::filesystem::create_directory(dir.path("d.keras"));
  EXPECT_THROW(model->save(dir.path("d.keras")), Error);
  // Nothing but the file is left beside it.
  int entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.dir())) ++entries;
  EXPECT_EQ(entries, 2);
}

// ---- errors

std::string load_error_of(const std::string& path) {
  try {
    load_model(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The fixture's entries with `change` applied, written as a new .keras file.
std::string rewritten(const test::TempDir& dir, const std::string& name,
                      const std::function<void(std::map<std::string, std::string>&)>& change) {
  io::ZipReader zip(io::read_file(fixture("mlp.keras")), "mlp.keras");
  std::map<std::string, std::string> entries;
  for (const std::string& n : zip.names()) entries[n] = zip.read(n);
  change(entries);
  std::vector<std::pair<std::string, std::string>> list(entries.begin(), entries.end());
  const std::string path = dir.path(name);
  io::write_file_atomically(path, io::zip_bytes(list));
  return path;
}

TEST(KerasFileErrors, EachNamesWhatIsWrong) {
  test::TempDir dir;
  EXPECT_THAT(load_error_of(dir.path("none.keras")), ::testing::HasSubstr("does not exist"));

  io::write_file_atomically(dir.path("junk.keras"), "this is not a zip archive at all");
  EXPECT_THAT(load_error_of(dir.path("junk.keras")),
              ::testing::HasSubstr("is not a valid zip archive"));

  const std::string whole = io::read_file(fixture("mlp.keras"));
  io::write_file_atomically(dir.path("cut.keras"), whole.substr(0, whole.size() / 2));
  EXPECT_THAT(load_error_of(dir.path("cut.keras")),
              ::testing::HasSubstr("is not a valid zip archive"));

  std::string flipped = whole;
  const size_t at = flipped.find("model.weights.h5") + 200;  // inside the stored weights
  flipped[at] = char(flipped[at] ^ 0x5a);
  io::write_file_atomically(dir.path("crc.keras"), flipped);
  EXPECT_THAT(load_error_of(dir.path("crc.keras")), ::testing::HasSubstr("damaged"));

  auto no_weights =
      rewritten(dir, "no_weights.keras", [](auto& e) { e.erase("model.weights.h5"); });
  EXPECT_THAT(load_error_of(no_weights), ::testing::HasSubstr("has no \"model.weights.h5\""));

  auto bad_h5 = rewritten(dir, "bad_h5.keras",
                          [](auto& e) { e["model.weights.h5"] = "\x89HDF\r\n\x1a\n garbage"; });
  EXPECT_THAT(load_error_of(bad_h5), ::testing::HasSubstr("is not a readable HDF5 file"));

  auto unknown = rewritten(dir, "unknown.keras", [](auto& e) {
    Json c = Json::parse(e["config.json"]);
    c["config"]["layers"][1]["class_name"] = "FancyDense";
    e["config.json"] = c.dump();
  });
  EXPECT_THAT(load_error_of(unknown), ::testing::HasSubstr("unknown layer class \"FancyDense\""));

  auto custom = rewritten(dir, "custom.keras", [](auto& e) {
    Json c = Json::parse(e["config.json"]);
    c["config"]["layers"][1]["module"] = "my_package.layers";
    c["config"]["layers"][1]["registered_name"] = "my_package>Dense";
    e["config.json"] = c.dump();
  });
  EXPECT_THAT(load_error_of(custom), ::testing::HasSubstr("is a custom object"));

  auto refused = rewritten(dir, "refused.keras", [](auto& e) {
    Json c = Json::parse(e["config.json"]);
    c["config"]["layers"][1]["config"]["lora_rank"] = 4;
    e["config.json"] = c.dump();
  });
  EXPECT_THAT(load_error_of(refused), ::testing::HasSubstr("lora_rank=4"));

  auto policy = rewritten(dir, "policy.keras", [](auto& e) {
    Json c = Json::parse(e["config.json"]);
    c["config"]["layers"][1]["config"]["dtype"]["config"]["name"] = "mixed_float16";
    e["config.json"] = c.dump();
  });
  EXPECT_THAT(load_error_of(policy), ::testing::HasSubstr("mixed_float16"));

  auto ema = rewritten(dir, "ema.keras", [](auto& e) {
    Json c = Json::parse(e["config.json"]);
    c["compile_config"]["optimizer"]["config"]["use_ema"] = true;
    e["config.json"] = c.dump();
  });
  EXPECT_THAT(load_error_of(ema), ::testing::HasSubstr("use_ema"));

  auto assets = rewritten(dir, "assets.keras", [](auto& e) { e["assets/vocab.txt"] = "a\nb\n"; });
  EXPECT_THAT(load_error_of(assets), ::testing::HasSubstr("assets/vocab.txt"));

  // Weights files with a dataset missing, one too many, one misshapen, one of another dtype.
  auto weights = [&](const std::string& name, const std::function<void(io::Hdf5Writer&)>& edit) {
    return rewritten(dir, name, [&](auto& e) {
      io::Hdf5Reader in(e["model.weights.h5"], "in");
      io::Hdf5Writer out;
      for (const char* layer : {"dense", "dense_1", "dense_2"}) {
        out.group(fmt::format("layers/{}/vars", layer), layer);
        for (int i = 0; i < 2; ++i) {
          const std::string p = fmt::format("layers/{}/vars/{}", layer, i);
          if (p != "layers/dense_1/vars/1") out.dataset(p, in.read(p));
        }
      }
      edit(out);
      e["model.weights.h5"] = out.image();
    });
  };
  EXPECT_THAT(load_error_of(weights("missing.keras", [](io::Hdf5Writer&) {})),
              ::testing::HasSubstr("no dataset for 1 of the model's variables: "
                                   "layers/dense_1/vars/1"));
  EXPECT_THAT(load_error_of(weights("extra.keras",
                                    [](io::Hdf5Writer& w) {
                                      w.dataset("layers/dense_1/vars/1", zeros({4}));
                                      w.dataset("layers/dense_1/vars/2", zeros({4}));
                                    })),
              ::testing::HasSubstr("layers/dense_1/vars/2"));
  EXPECT_THAT(load_error_of(weights(
                  "shape.keras",
                  [](io::Hdf5Writer& w) { w.dataset("layers/dense_1/vars/1", zeros({5})); })),
              ::testing::HasSubstr("\"layers/dense_1/vars/1\" is f32[5]"));
  EXPECT_THAT(load_error_of(weights("dtype.keras",
                                    [](io::Hdf5Writer& w) {
                                      w.dataset("layers/dense_1/vars/1", zeros({4}, DType::f64));
                                    })),
              ::testing::HasSubstr("is f64[4]"));

  // An optimizer Keras never stepped holds iterations and the learning rate only: it loads so.
  auto unstepped = rewritten(dir, "unstepped.keras", [](auto& e) {
    io::Hdf5Reader in(e["model.weights.h5"], "in");
    io::Hdf5Writer out;
    for (const char* layer : {"dense", "dense_1", "dense_2"}) {
      out.group(fmt::format("layers/{}/vars", layer), layer);
      for (int i = 0; i < 2; ++i) {
        const std::string p = fmt::format("layers/{}/vars/{}", layer, i);
        out.dataset(p, in.read(p));
      }
    }
    out.group("optimizer/vars", "adam");
    out.dataset("optimizer/vars/0", in.read("optimizer/vars/0"));
    out.dataset("optimizer/vars/1", in.read("optimizer/vars/1"));
    e["model.weights.h5"] = out.image();
  });
  Model fresh = load_model(unstepped);
  EXPECT_EQ(fresh->compile_options().optimizer->iterations(), 1);
  EXPECT_TRUE(fresh->compile_options().optimizer->slots().empty());

  // The optimizer's variables must be Keras' count for its settings.
  auto optimizer = rewritten(dir, "optimizer.keras", [](auto& e) {
    Json c = Json::parse(e["config.json"]);
    c["compile_config"]["optimizer"]["config"]["amsgrad"] = true;
    e["config.json"] = c.dump();
  });
  EXPECT_THAT(load_error_of(optimizer),
              ::testing::HasSubstr("\"optimizer/vars\" holds 14 variables"));
}

}  // namespace
}  // namespace kiln

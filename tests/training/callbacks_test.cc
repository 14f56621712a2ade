// Callbacks: the progress bar's text, EarlyStopping, ModelCheckpoint, CSVLogger and History.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "kiln/keras/io/file_util.h"
#include "kiln/kiln.h"

namespace kiln {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;
namespace fs = std::filesystem;

TEST(Progbar, FinalLineInKerasStyle) {
  std::ostringstream os;
  Progbar bar(22, os, 1, /*interactive=*/false);
  bar.update(5, {{"loss", 1.0}}, false);  // not a terminal: nothing until the end
  EXPECT_EQ(os.str(), "");
  bar.update(22, {{"accuracy", 0.88123}, {"loss", 0.41009}}, true);
  EXPECT_THAT(os.str(), MatchesRegex("22/22 ━━━━━━━━━━━━━━━━━━━━ 0s [0-9]+(us|ms)/step - "
                                     "accuracy: 0\\.8812 - loss: 0\\.4101\n"));
  std::ostringstream os2;
  Progbar quiet(3, os2, 2, false);
  quiet.update(3, {{"loss", 2e-5}}, true);
  EXPECT_THAT(os2.str(), MatchesRegex("3/3 - 0s - [0-9]+(us|ms)/step - loss: 2\\.0000e-05\n"));
  std::ostringstream os3;
  Progbar live(10, os3, 1, /*interactive=*/true);
  live.update(5, {{"loss", 1.5}}, false);
  EXPECT_THAT(os3.str(), HasSubstr("\r"));
  EXPECT_THAT(os3.str(), HasSubstr(" 5/10"));
  EXPECT_THAT(os3.str(), HasSubstr("loss: 1.5000"));
}

Sequential small_model(double lr) {
  clear_session();
  set_random_seed(0);
  Sequential m({Dense(10)}, Shape{64});
  m->compile({.optimizer = SGD({.learning_rate = lr}),
              .loss = losses::sparse_categorical_crossentropy(true),
              .metrics = {"accuracy"}});
  return m;
}

TEST(Callbacks, EarlyStoppingStopsAfterPatience) {
  data::Examples d = data::load_digits();
  Sequential m = small_model(0.0);  // nothing improves
  auto stop = std::make_shared<EarlyStopping>(
      EarlyStoppingOptions{.monitor = "loss", .min_delta = 1e-3, .patience = 2});
  auto h = m->fit(d.x, d.y, {.epochs = 10, .verbose = 0, .callbacks = {stop}});
  EXPECT_EQ(h->history.at("loss").size(), 3u);  // epoch 0 sets the best, 1 and 2 wait
  EXPECT_EQ(stop->stopped_epoch(), 2);
}

TEST(Callbacks, EarlyStoppingRestoresBestWeights) {
  data::Examples d = data::load_digits();
  Sequential m = small_model(0.05);
  // mode max on a falling val_loss: epoch 0 is the best, so training stops after patience 1
  // and the weights of epoch 0 come back.
  auto stop = std::make_shared<EarlyStopping>(EarlyStoppingOptions{.monitor = "val_loss",
                                                                   .patience = 1,
                                                                   .mode = MonitorMode::kMax,
                                                                   .restore_best_weights = true});
  auto h =
      m->fit(d.x, d.y, {.epochs = 8, .verbose = 0, .callbacks = {stop}, .validation_split = 0.2});
  ASSERT_EQ(stop->stopped_epoch(), 1);
  ASSERT_EQ(stop->best_epoch(), 0);
  const auto& val = h->history.at("val_loss");
  ASSERT_EQ(val.size(), 2u);
  ASSERT_LT(val[1], val[0]);
  std::vector<int64_t> rows;
  for (int64_t i = 1797 - 359; i < 1797; ++i) rows.push_back(i);
  data::Examples v = data::take(d, rows);
  EXPECT_NEAR(m->evaluate(v.x, v.y, {.verbose = 0}).at("loss"), val[0], 1e-5);
}

// A new directory of this process: ctest runs these tests twice in parallel (the x86-64-v3
// rerun), so a fixed path would be shared.
fs::path fresh_directory(const std::string& stem) {
  std::string t = (fs::temp_directory_path() / (stem + "_XXXXXX")).string();
  if (mkdtemp(t.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + t);
  return t;
}

TEST(Callbacks, ModelCheckpointFormatsPathsAndSavesBest) {
  fs::path dir = fresh_directory("kiln_ckpt_test");
  ModelCheckpoint fmt_only((dir / "w_{epoch:02d}_{loss:.2f}.safetensors").string());
  EXPECT_EQ(fmt_only.format_path(2, {{"loss", 0.4567}}), (dir / "w_03_0.46.safetensors").string());
  EXPECT_THROW(fmt_only.format_path(0, {}), Error);

  data::Examples d = data::load_digits();
  Sequential m = small_model(0.01);
  auto ckpt = std::make_shared<ModelCheckpoint>(
      (dir / "e{epoch}.safetensors").string(),
      ModelCheckpointOptions{.monitor = "loss", .save_best_only = true});
  m->fit(d.x, d.y, {.epochs = 3, .verbose = 0, .callbacks = {ckpt}});
  for (int e = 1; e <= 3; ++e)
    EXPECT_TRUE(fs::exists(dir / ("e" + std::to_string(e) + ".safetensors")));
  Sequential other = small_model(0.01);
  other->load_weights((dir / "e3.safetensors").string());
  EXPECT_EQ(other->weights()[0].value().to_vector<float>(),
            m->weights()[0].value().to_vector<float>());
  fs::remove_all(dir);
}

TEST(Callbacks, CsvLoggerWritesOneRowPerEpoch) {
  const fs::path dir = fresh_directory("kiln_csv_test");
  const fs::path p = dir / "log.csv";
  data::Examples d = data::load_digits();
  Sequential m = small_model(0.01);
  m->fit(d.x, d.y,
         {.epochs = 2, .verbose = 0, .callbacks = {std::make_shared<CSVLogger>(p.string())}});
  std::string csv = io::read_file(p.string());
  EXPECT_THAT(csv,
              MatchesRegex("epoch,accuracy,loss\n0,[0-9.e-]+,[0-9.e-]+\n1,[0-9.e-]+,[0-9.e-]+\n"));
  m->fit(d.x, d.y,
         {.epochs = 1,
          .verbose = 0,
          .callbacks = {std::make_shared<CSVLogger>(p.string(), ',', true)}});
  EXPECT_THAT(io::read_file(p.string()), HasSubstr("\n1,"));
  std::string appended = io::read_file(p.string());
  EXPECT_EQ(std::count(appended.begin(), appended.end(), '\n'), 4);
  fs::remove_all(dir);
}

// A callback that records the order of hooks.
struct Recorder : Callback {
  std::vector<std::string> calls;
  void on_train_begin(const Logs&) override { calls.push_back("train_begin"); }
  void on_epoch_begin(int e, const Logs&) override {
    calls.push_back("epoch_begin " + std::to_string(e));
  }
  void on_train_batch_end(int b, const Logs& l) override {
    if (b == 0) calls.push_back(l.count("loss") ? "batch_end with loss" : "batch_end");
  }
  void on_epoch_end(int e, const Logs&) override {
    calls.push_back("epoch_end " + std::to_string(e));
  }
  void on_train_end(const Logs&) override { calls.push_back("train_end"); }
};

TEST(Callbacks, HooksRunInKerasOrder) {
  data::Examples d = data::load_digits();
  Sequential m = small_model(0.01);
  auto rec = std::make_shared<Recorder>();
  m->fit(d.x, d.y, {.epochs = 2, .verbose = 0, .callbacks = {rec}});
  EXPECT_EQ(rec->calls, (std::vector<std::string>{
                            "train_begin", "epoch_begin 0", "batch_end with loss", "epoch_end 0",
                            "epoch_begin 1", "batch_end with loss", "epoch_end 1", "train_end"}));
  EXPECT_EQ(rec->model(), &m.get());
  EXPECT_EQ(rec->params().at("steps"), 57);
}

}  // namespace
}  // namespace kiln

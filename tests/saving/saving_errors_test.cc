// Every damaged saved model is a kiln::Error naming the file and the entry: missing files, bad
// JSON, unknown formats and classes, missing, extra, misshapen, mistyped and corrupt tensors,
// bad optimizer state; and save refuses to replace what is not a saved model.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "kiln/keras/io/file_util.h"
#include "kiln/kiln.h"
#include "tests/saving/saving_test_util.h"
#include "tests/support/error_of.h"

namespace kiln {
namespace {

using test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

class SavedModelErrors : public ::testing::Test {
 protected:
  // Saves the model afresh (a test may call it again after damaging the last one).
  void SetUp() override {
    std::filesystem::remove_all(dir());
    clear_session();
    Sequential m({Dense(3, {.name = "hidden"}), Dense(2, {.name = "out"})}, Shape{4}, "m");
    m->compile({.optimizer = Adam(), .loss = "mse"});
    m->fit(random_normal({8, 4}, 1), random_normal({8, 2}, 2),
           {.batch_size = 4, .epochs = 1, .verbose = 0});
    m->save(dir());
  }
  std::string dir() const { return tmp_.path("m"); }
  std::string file(const std::string& name) const { return dir() + "/" + name; }
  Json read_json(const std::string& name) const { return Json::parse(io::read_file(file(name))); }
  void write_json(const std::string& name, const Json& j) const {
    io::write_file_atomically(file(name), j.dump());
  }
  // Rewrites a safetensors file through `edit`.
  void edit_tensors(const std::string& name, const std::function<void(NamedTensors&)>& edit) {
    std::map<std::string, std::string> meta;
    NamedTensors t = load_safetensors(file(name), &meta);
    edit(t);
    save_safetensors(file(name), t, meta);
  }
  std::string load_error() const {
    return error_of([&] { load_model(dir()); });
  }

  test::TempDir tmp_;
};

TEST_F(SavedModelErrors, NotADirectory) {
  EXPECT_THAT(error_of([&] { load_model(file("config.json")); }),
              HasSubstr("is not a directory; a saved model is the directory"));
  EXPECT_THAT(error_of([&] { load_model(tmp_.path("nothing")); }), HasSubstr("is not a directory"));
}

TEST_F(SavedModelErrors, MissingFiles) {
  for (const char* name :
       {"metadata.json", "config.json", "model.weights.safetensors", "optimizer.safetensors"}) {
    SetUp();
    std::filesystem::remove(file(name));
    EXPECT_THAT(load_error(), AllOf(HasSubstr(file(name)), HasSubstr("cannot open"))) << name;
  }
}

TEST_F(SavedModelErrors, BadJson) {
  io::write_file_atomically(file("config.json"), "{\"class_name\": \"Sequential\", ");
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("config.json")), HasSubstr("is not valid JSON")));
}

TEST_F(SavedModelErrors, ForeignOrNewerFormat) {
  Json meta = read_json("metadata.json");
  meta["format"] = "keras";
  write_json("metadata.json", meta);
  EXPECT_THAT(load_error(), HasSubstr("\"format\" should be \"kiln.model\""));
  meta["format"] = "kiln.model";
  meta["format_version"] = 2;
  write_json("metadata.json", meta);
  EXPECT_THAT(load_error(), HasSubstr("format_version 2 is not one this kiln"));
}

TEST_F(SavedModelErrors, UnknownLayerClassAndBadEntries) {
  Json config = read_json("config.json");
  config["config"]["layers"][1]["class_name"] = "Denser";
  write_json("config.json", config);
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("config.json")),
                                  HasSubstr("unknown layer class \"Denser\" (layer \"out\")")));
  config["config"]["layers"][1]["class_name"] = "Dense";
  config["config"]["layers"][1]["config"]["units"] = -2;
  write_json("config.json", config);
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("config.json")), HasSubstr("units=-2")));
  config["config"]["layers"][1]["config"]["units"] = 2;
  config["compile_config"]["optimizer"]["class_name"] = "Adagrad";
  write_json("config.json", config);
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("config.json")), HasSubstr("\"Adagrad\""),
                                  HasSubstr("compile = false")));
}

TEST_F(SavedModelErrors, ConfigThatDisagreesWithTheWeights) {
  Json config = read_json("config.json");
  config["config"]["layers"][1]["config"]["units"] = 5;
  write_json("config.json", config);
  EXPECT_THAT(load_error(),
              AllOf(HasSubstr(file("model.weights.safetensors")),
                    HasSubstr("entry \"layers/out/vars/0\" (out/kernel) is f32[3,2], but the "
                              "model's variable is f32[3,5]")));
}

TEST_F(SavedModelErrors, MissingExtraAndMistypedWeights) {
  edit_tensors("model.weights.safetensors", [](NamedTensors& t) {
    std::erase_if(t, [](const auto& e) { return e.first == "layers/out/vars/1"; });
  });
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("model.weights.safetensors")),
                                  HasSubstr("has no entry for 1 of the model's variables: "
                                            "layers/out/vars/1 (out/bias, f32[2])")));
  SetUp();
  edit_tensors("model.weights.safetensors",
               [](NamedTensors& t) { t.emplace_back("layers/out/vars/2", zeros({2})); });
  EXPECT_THAT(load_error(), HasSubstr("has 1 entry the model does not have: layers/out/vars/2"));
  SetUp();
  edit_tensors("model.weights.safetensors", [](NamedTensors& t) {
    for (auto& [name, v] : t)
      if (name == "layers/hidden/vars/1") v = zeros({3}, DType::f64);
  });
  EXPECT_THAT(load_error(), HasSubstr("entry \"layers/hidden/vars/1\" (hidden/bias) is f64[3], "
                                      "but the model's variable is f32[3]"));
}

TEST_F(SavedModelErrors, CorruptSafetensors) {
  std::string bytes = io::read_file(file("model.weights.safetensors"));
  io::write_file_atomically(file("model.weights.safetensors"), bytes.substr(0, bytes.size() - 5));
  EXPECT_THAT(load_error(), HasSubstr(file("model.weights.safetensors")));
  io::write_file_atomically(file("model.weights.safetensors"), "garbage");
  EXPECT_THAT(load_error(), HasSubstr(file("model.weights.safetensors")));
}

TEST_F(SavedModelErrors, BadOptimizerState) {
  edit_tensors("optimizer.safetensors", [](NamedTensors& t) {
    std::erase_if(t, [](const auto& e) { return e.first == "iterations"; });
  });
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("optimizer.safetensors")),
                                  HasSubstr("no entry for 1 of the model's variables: "
                                            "iterations (adam/iterations, i64[])")));
  SetUp();
  edit_tensors("optimizer.safetensors", [](NamedTensors& t) {
    t.emplace_back("slots/layers/out/vars/0/acceleration", zeros({3, 2}));
  });
  EXPECT_THAT(load_error(), AllOf(HasSubstr(file("optimizer.safetensors")),
                                  HasSubstr("has no slot \"acceleration\" for \"out/kernel\"; "
                                            "its slots: momentum, velocity")));
  SetUp();
  edit_tensors("optimizer.safetensors", [](NamedTensors& t) {
    t.emplace_back("slots/layers/ghost/vars/0/momentum", zeros({3, 2}));
  });
  EXPECT_THAT(load_error(), HasSubstr("entry \"slots/layers/ghost/vars/0/momentum\" is the slot "
                                      "of \"layers/ghost/vars/0\", which is not a variable"));
  SetUp();
  edit_tensors("optimizer.safetensors", [](NamedTensors& t) {
    for (auto& [name, v] : t)
      if (name == "slots/layers/out/vars/0/momentum") v = zeros({2, 3});
  });
  EXPECT_THAT(load_error(), HasSubstr("entry \"slots/layers/out/vars/0/momentum\" is f32[2,3], "
                                      "but its variable out/kernel is f32[3,2]"));
  SetUp();
  edit_tensors("optimizer.safetensors", [](NamedTensors& t) {
    for (auto& [name, v] : t)
      if (name == "hyperparameters/beta_1") v = scalar(0.9, DType::f32);
  });
  EXPECT_THAT(load_error(), HasSubstr("entry \"hyperparameters/beta_1\" (adam/beta_1) is f32[]"));
}

TEST_F(SavedModelErrors, SaveRefusesToReplaceWhatIsNotASavedModel) {
  Sequential m({Dense(1)}, Shape{2});
  std::filesystem::create_directory(tmp_.path("docs"));
  io::write_file_atomically(tmp_.path("docs/notes.txt"), "keep me");
  EXPECT_THAT(error_of([&] { m->save(tmp_.path("docs")); }),
              HasSubstr("exists and is not a saved kiln model"));
  EXPECT_EQ(io::read_file(tmp_.path("docs/notes.txt")), "keep me");
  EXPECT_THAT(error_of([&] { m->save(file("config.json")); }),
              HasSubstr("exists and is not a saved kiln model"));
  EXPECT_THAT(error_of([&] { m->save(dir(), {.overwrite = false}); }),
              HasSubstr("already holds a saved model and overwrite is off"));
  EXPECT_THAT(error_of([&] { m->save(tmp_.path("no/such/parent")); }),
              HasSubstr("cannot create the directory"));
}

}  // namespace
}  // namespace kiln

// A test suite over one model file and its llama.cpp fixture (scripts/reference/): the parsed
// fixture and one engine prepared for 512-token chunks, made once and shared by the suite's
// tests (the upload and the kernel builds are the slow part).
//   struct SmolLM2 { static constexpr const char* kFixture = "smollm2_logits.json";
//                    static std::string model() { return test::real_model_path(); } };
//   using ModelReference = test::ReferenceSuite<SmolLM2>;   // then TEST_F(ModelReference, ...)
#pragma once
#include <fstream>
#include <string>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/engine.h"

namespace infinipot::test {

inline nlohmann::json load_reference_fixture(const std::string& name) {
  const std::string path = std::string(INFINIPOT_TEST_SOURCE_DIR) + "/tests/fixtures/" + name;
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "missing " << path << " (made by the scripts in scripts/reference/)";
  return nlohmann::json::parse(in);
}

template <class Model>
class ReferenceSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fixture_ = new nlohmann::json(load_reference_fixture(Model::kFixture));
    EngineOptions o;
    o.model_path = Model::model();
    engine_ = new Engine(o);
    engine_->prepare(512);
  }
  static void TearDownTestSuite() {
    delete engine_;
    delete fixture_;
    engine_ = nullptr;
    fixture_ = nullptr;
  }
  static inline Engine* engine_ = nullptr;
  static inline nlohmann::json* fixture_ = nullptr;
};

}  // namespace infinipot::test

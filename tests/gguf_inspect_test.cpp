// `memra inspect` end to end: runs the built binary on a fixture and on a broken file.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "test_util.h"

namespace {

struct Result {
  int status = -1;
  std::string out;
};

// Runs `memra <args>` with stdout and stderr captured together.
Result run_memra(const std::string& args) {
  Result r;
  const std::string cmd = "'" + memra::test::memra_binary() + "' " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class GgufInspect : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(memra::test::memra_binary()))
        << "memra binary not found at " << memra::test::memra_binary() << " (build the `memra` target first)";
  }
};

TEST_F(GgufInspect, JsonOnFixture) {
  const std::string path = memra::test::fixture("qwen35-tiny.f32.gguf");
  Result r = run_memra("inspect --json '" + path + "'");
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["version"], 3);
  EXPECT_EQ(j["alignment"], 32);
  EXPECT_EQ(j["data_offset"], 31680);
  EXPECT_EQ(j["metadata"]["qwen35.block_count"]["value"], 4);
  EXPECT_EQ(j["metadata"]["qwen35.block_count"]["type"], "u32");
  const auto& tokens = j["metadata"]["tokenizer.ggml.tokens"];
  EXPECT_EQ(tokens["count"], 1024);
  EXPECT_EQ(tokens["elem_type"], "string");
  EXPECT_EQ(tokens["truncated"], true);
  EXPECT_LT(tokens["values"].size(), 1024u);
  EXPECT_DOUBLE_EQ(j["metadata"]["qwen35.attention.layer_norm_rms_epsilon"]["value"].get<double>(), 1e-6);
  ASSERT_EQ(j["tensors"].size(), 56u);
  EXPECT_EQ(j["totals"]["tensors"], 56);
  bool found = false;
  for (const auto& t : j["tensors"]) {
    if (t["name"] != "blk.0.ssm_conv1d.weight") continue;
    found = true;
    EXPECT_EQ(t["type"], "f32");
    EXPECT_EQ(t["shape"], nlohmann::json::array({4, 256}));
    EXPECT_EQ(t["bytes"], 4096);
  }
  EXPECT_TRUE(found);
}

TEST_F(GgufInspect, TextOnFixture) {
  Result r = run_memra("inspect '" + memra::test::fixture("qwen3-vocab.gguf") + "'");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("[151936 x string]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tokenizer.chat_template"), std::string::npos);
  EXPECT_NE(r.out.find("(4116 bytes)"), std::string::npos) << r.out;  // long template cut, length shown
  EXPECT_LT(r.out.size(), 8000u);
}

TEST_F(GgufInspect, BrokenFileIsOneLineAndExit1) {
  auto bad = std::filesystem::temp_directory_path() / ("memra_inspect_bad_" + std::to_string(::getpid()) + ".gguf");
  {
    std::ifstream in(memra::test::fixture("qwen35-tiny.f32.gguf"), std::ios::binary);
    std::string head(20000, '\0');
    in.read(head.data(), static_cast<std::streamsize>(head.size()));
    std::ofstream(bad.string(), std::ios::binary) << head;
  }
  Result r = run_memra("inspect '" + bad.string() + "'");
  std::filesystem::remove(bad);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << r.out;  // exactly one line
  EXPECT_NE(r.out.find(bad.string()), std::string::npos) << r.out;
  Result missing = run_memra("inspect /nonexistent/model.gguf --json");
  EXPECT_EQ(missing.status, 1) << missing.out;
  EXPECT_NE(missing.out.find("No such file"), std::string::npos) << missing.out;
}

}  // namespace

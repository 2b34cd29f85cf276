// `memra tokenize` / `memra detokenize`, run as a user would (the built binary, via the shell).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace memra {
namespace {

struct CliResult {
  int status = -1;  // exit code
  std::string out;  // stdout
};

// Single-quotes s for /bin/sh.
std::string sh_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += (c == '\'') ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

CliResult memra(const std::string& args) {
  const std::string cmd = sh_quote(test::memra_binary()) + " " + args + " 2>/dev/null";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) {
    ADD_FAILURE() << "cannot run " << cmd;
    return r;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

std::string vocab() { return sh_quote(test::fixture("qwen3-vocab.gguf")); }

TEST(TokenizerCli, TokenizePrintsIdsAsJson) {
  CliResult r = memra("tokenize -m " + vocab() + " --text " + sh_quote("Hello world"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "{\"ids\":[9707,1879]}\n");
  r = memra("tokenize -m " + vocab() + " --text " + sh_quote("<|im_end|>"));
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json::array({151645}));
  r = memra("tokenize -m " + vocab() + " --no-special --text " + sh_quote("<|im_end|>"));
  ASSERT_EQ(r.status, 0);
  EXPECT_GT(nlohmann::json::parse(r.out)["ids"].size(), 1u);
}

TEST(TokenizerCli, DetokenizePrintsTextOrJson) {
  CliResult r = memra("detokenize -m " + vocab() + " --ids 9707,1879,0");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "Hello world!");
  r = memra("detokenize -m " + vocab() + " --json --ids " + sh_quote("[9707, 1879]"));
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(nlohmann::json::parse(r.out)["text"], "Hello world");
}

TEST(TokenizerCli, BadInputIsAnErrorNotACrash) {
  EXPECT_EQ(memra("tokenize").status, 2);  // --text is required (usage error)
  // Without -m, the bundled demo model's tokenizer, as the other commands default to.
  const CliResult demo = memra("tokenize --text hi");
  EXPECT_EQ(demo.status, 0) << demo.out;
  EXPECT_TRUE(nlohmann::json::parse(demo.out, nullptr, false)["ids"].is_array()) << demo.out;
  EXPECT_EQ(memra("detokenize -m " + vocab() + " --ids 1,x").status, 1);
  EXPECT_EQ(memra("detokenize -m " + vocab() + " --ids 99999999").status, 1);
  EXPECT_EQ(memra("tokenize -m /nonexistent.gguf --text hi").status, 1);
}

}  // namespace
}  // namespace memra

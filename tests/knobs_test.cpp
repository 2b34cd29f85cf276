// The MEMRA_* knob registry: defaults, strict parsing, errors that name the variable; every knob
// parsed into an option (the one place that reads them) and listed in the README.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/knobs.h"
#include "engine/options.h"
#include "test_util.h"

namespace memra {
namespace {

// Sets an environment variable (a MEMRA_* knob) for its lifetime, then restores what was there.
// Only the knob parser's own tests set the environment: everything else passes options.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// Every knob unset (empty counts as unset) for the scope.
class NoKnobs {
 public:
  NoKnobs() {
    for (const knobs::Knob& k : knobs::all()) unset_.push_back(std::make_unique<ScopedEnv>(k.name, ""));
  }

 private:
  std::vector<std::unique_ptr<ScopedEnv>> unset_;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// A valid value of `k` other than its default.
std::string other_value(const knobs::Knob& k) {
  const std::string dflt = k.dflt;
  switch (k.kind) {
    case knobs::Kind::Bool: return dflt == "1" ? "0" : "1";
    case knobs::Kind::Int: return std::to_string(std::stoll(dflt) == k.max ? k.min : k.max);
    case knobs::Kind::String: {
      const std::string choices = k.choices ? k.choices : "";
      for (size_t at = 0; at <= choices.size();) {
        const size_t bar = std::min(choices.find('|', at), choices.size());
        const std::string choice = choices.substr(at, bar - at);
        if (choice != dflt) return choice;
        at = bar + 1;
      }
      return dflt + "-other";
    }
  }
  return dflt;
}

std::string error_of(void (*f)()) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Knobs, DefaultsWhenUnset) {
  ScopedEnv a("MEMRA_CUDA_KV", "");
  ScopedEnv b("MEMRA_CUDA_PDL", "");
  ScopedEnv c("MEMRA_PREFILL_CHUNK", "");
  EXPECT_EQ(knobs::get_string("MEMRA_CUDA_KV"), "f16");
  EXPECT_TRUE(knobs::get_bool("MEMRA_CUDA_PDL"));
  EXPECT_EQ(knobs::get_int("MEMRA_PREFILL_CHUNK"), 512);
}

TEST(Knobs, ValuesParseStrictly) {
  {
    ScopedEnv e("MEMRA_CUDA_KV", "q8_0");
    EXPECT_EQ(knobs::get_string("MEMRA_CUDA_KV"), "q8_0");
  }
  {
    ScopedEnv e("MEMRA_CUDA_KV", "q8");
    const std::string msg = error_of([] { knobs::get_string("MEMRA_CUDA_KV"); });
    EXPECT_NE(msg.find("MEMRA_CUDA_KV='q8'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f16|q8_0"), std::string::npos) << msg;
  }
  {
    ScopedEnv e("MEMRA_DEVICE", "cpu|cuda");  // a whole list is not one of its values
    EXPECT_NE(error_of([] { knobs::get_string("MEMRA_DEVICE"); }).find("MEMRA_DEVICE"), std::string::npos);
  }
  {
    ScopedEnv e("MEMRA_CUDA_PDL", "yes please");
    EXPECT_NE(error_of([] { knobs::get_bool("MEMRA_CUDA_PDL"); }).find("MEMRA_CUDA_PDL"), std::string::npos);
  }
  {
    ScopedEnv e("MEMRA_CUDA_SCRATCH_MB", "5");
    EXPECT_NE(error_of([] { knobs::get_int("MEMRA_CUDA_SCRATCH_MB"); }).find("[64, "), std::string::npos);
  }
  {
    ScopedEnv e("MEMRA_PREFILL_CHUNK", "64k");
    EXPECT_NE(error_of([] { knobs::get_int("MEMRA_PREFILL_CHUNK"); }).find("MEMRA_PREFILL_CHUNK='64k'"),
              std::string::npos);
  }
}

// The option structs' defaults are the knobs' defaults: a test that sets options and the CLI
// with no MEMRA_* variables run the same engine.
TEST(Knobs, UnsetKnobsGiveTheOptionDefaults) {
  NoKnobs none;
  EXPECT_TRUE(engine_options_from_knobs() == EngineOptions{});
}

// Every registered knob is parsed into an option: setting it to another valid value changes the
// options the CLI hands down.
TEST(Knobs, EveryKnobSetsAnOption) {
  NoKnobs none;
  const EngineOptions defaults = engine_options_from_knobs();
  for (const knobs::Knob& k : knobs::all()) {
    const std::string value = other_value(k);
    ScopedEnv set(k.name, value.c_str());
    EXPECT_FALSE(engine_options_from_knobs() == defaults) << k.name << "=" << value << " changes no option";
  }
}

// The README documents every knob by name.
TEST(Knobs, ReadmeListsEveryKnob) {
  const std::string readme = read_file(test::source_path("README.md"));
  ASSERT_FALSE(readme.empty()) << "cannot read README.md";
  for (const knobs::Knob& k : knobs::all())
    EXPECT_NE(readme.find(std::string("`") + k.name), std::string::npos) << k.name << " is not in the README";
}

// Knobs are read at the edge only: engine/options.cpp parses them, common/knobs.cpp is the
// registry; no other source reads them or the environment.
TEST(Knobs, OnlyTheOptionsParserReadsThem) {
  const std::filesystem::path src = test::source_path("src");
  for (const auto& entry : std::filesystem::recursive_directory_iterator(src)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = std::filesystem::relative(entry.path(), src).generic_string();
    if (rel == "engine/options.cpp" || rel == "common/knobs.cpp" || rel == "common/knobs.h") continue;
    const std::string text = read_file(entry.path().string());
    EXPECT_EQ(text.find("knobs::get_"), std::string::npos) << rel << " reads a knob";
    EXPECT_EQ(text.find("getenv(\"MEMRA_"), std::string::npos) << rel << " reads a MEMRA_* variable";
  }
}

TEST(Knobs, DescribeListsEveryKnob) {
  const std::string all = knobs::describe_all();
  for (const knobs::Knob& k : knobs::all()) EXPECT_NE(all.find(k.name), std::string::npos) << k.name;
}

}  // namespace
}  // namespace memra

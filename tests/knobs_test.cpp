// The MEMRA_* knob registry: defaults, strict parsing, errors that name the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "common/error.h"
#include "common/knobs.h"
#include "test_util.h"

namespace memra {
namespace {

// Sets an environment variable for the scope of a test, restoring the previous state.
using test::ScopedEnv;

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

TEST(Knobs, DescribeListsEveryKnob) {
  const std::string all = knobs::describe_all();
  for (const char* name : {"MEMRA_THREADS", "MEMRA_DEVICE", "MEMRA_CUDA_KV", "MEMRA_CUDA_PDL", "MEMRA_CUDA_GDN_CHUNKED"})
    EXPECT_NE(all.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace memra

// Shared helpers for the test suite.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace memra::test {

// Path of a file in ../shared/fixtures. A missing fixture is a test failure with a clear
// message, never a silent skip.
// MEMRA_FIXTURES_DIR in the environment overrides the build-time path (the GPU machine gets a
// copy of the fixtures inside the checkout).
inline std::string fixture(const std::string& name) {
  const char* env = std::getenv("MEMRA_FIXTURES_DIR");
  std::filesystem::path p = std::filesystem::path(env && *env ? env : MEMRA_FIXTURES_DIR) / name;
  if (!std::filesystem::exists(p)) {
    ADD_FAILURE() << "fixture not found: " << p.string()
                  << " (tests expect the shared fixtures at ../shared/fixtures next to the checkout)";
  }
  return p.string();
}

inline std::string source_path(const std::string& rel) {
  return (std::filesystem::path(MEMRA_SOURCE_DIR) / rel).string();
}

inline std::string memra_binary() { return MEMRA_BINARY; }

// A file's bytes (empty when it cannot be read).
inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

}  // namespace memra::test

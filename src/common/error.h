// Errors and invariants.
//
// Two kinds of failure, kept apart on purpose:
// - memra::Error: something the user can fix (bad file, bad argument, unsupported model). It is
//   thrown, carries a one-line message naming the offending thing and what to do, and the CLI
//   prints it and exits 1.
// - MEMRA_ASSERT: an internal invariant. Always on (release builds too); prints file:line and
//   aborts, because continuing past a broken invariant could produce wrong tokens silently.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#ifndef __CUDACC__
#include <fmt/format.h>
#endif

namespace memra {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

#ifndef __CUDACC__
template <typename... Args>
[[noreturn]] inline void fail(fmt::format_string<Args...> fmt, Args&&... args) {
  throw Error(fmt::format(fmt, std::forward<Args>(args)...));
}
#endif

[[noreturn]] inline void assert_failed(const char* expr, const char* file, int line, const std::string& msg) {
  std::fprintf(stderr, "memra: internal error at %s:%d: assertion `%s` failed%s%s\n", file, line, expr,
               msg.empty() ? "" : ": ", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace memra

#ifdef __CUDACC__
// CUDA translation units (nvcc cannot compile fmt): the message arguments are not formatted.
#define MEMRA_ASSERT(cond, ...)                                                       \
  do {                                                                               \
    if (!(cond)) [[unlikely]]                                                        \
      ::memra::assert_failed(#cond, __FILE__, __LINE__, std::string());              \
  } while (0)
#else
#define MEMRA_ASSERT(cond, ...)                                                                   \
  do {                                                                                           \
    if (!(cond)) [[unlikely]]                                                                    \
      ::memra::assert_failed(#cond, __FILE__, __LINE__, ::memra::detail_assert_msg(__VA_ARGS__)); \
  } while (0)

namespace memra {
inline std::string detail_assert_msg() { return {}; }
template <typename... Args>
inline std::string detail_assert_msg(fmt::format_string<Args...> fmt, Args&&... args) {
  return fmt::format(fmt, std::forward<Args>(args)...);
}
}  // namespace memra
#endif

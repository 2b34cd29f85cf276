// Environment knobs: one typed registry of MEMRA_* variables, parsed strictly (a malformed value
// is an error naming the variable, never silently ignored) and printable in verbose mode.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace memra::knobs {

enum class Kind { Int, Bool, String };

// One registered knob.
struct Knob {
  const char* name;
  Kind kind;
  const char* dflt;
  int64_t min, max;                 // Int knobs: the accepted range
  const char* help;
  const char* choices = nullptr;    // String knobs: the allowed values, '|'-separated (null: any)
};

// Every registered knob, in registry order.
std::span<const Knob> all();

// Integer knob; returns the default when unset. Throws memra::Error if set but malformed or out
// of [min, max].
int64_t get_int(const char* name);
bool get_bool(const char* name);
std::string get_string(const char* name);
// One line per knob: name, value (or default), description.
std::string describe_all();

}  // namespace memra::knobs

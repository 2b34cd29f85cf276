// UTF-8 well-formedness as the Unicode standard defines it (Table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF), and the "maximal subpart" rule for replacing ill-formed
// bytes with U+FFFD (one U+FFFD per maximal subpart: the same output as Python's
// bytes.decode("utf-8", errors="replace") and the WHATWG decoder).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace memra::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

enum class Status {
  Valid,       // a complete, well-formed code point of `length` bytes
  Invalid,     // an ill-formed maximal subpart of `length` (>= 1) bytes: one U+FFFD
  Incomplete,  // the `length` bytes left are a well-formed prefix cut off by the end of input
};

struct Scan {
  Status status;
  size_t length;
};

// Classifies the sequence starting at s[0]; s must not be empty.
Scan scan(std::string_view s);

// True if every byte of s belongs to a well-formed code point.
bool is_valid(std::string_view s);

// s with each ill-formed maximal subpart (including a truncated sequence at the end) replaced
// by U+FFFD. Returns s unchanged when it is already valid.
std::string sanitize(std::string_view s);

// Appends the UTF-8 encoding of cp (cp must be a Unicode scalar value).
void append(std::string& out, uint32_t cp);

// Decodes the well-formed code point at s[pos] and advances pos. The caller guarantees s is
// valid UTF-8 (e.g. after sanitize).
uint32_t next(std::string_view s, size_t& pos);

}  // namespace memra::utf8

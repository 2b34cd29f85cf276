// JSON numbers and string formats as grammar expressions (used by json_schema.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "grammar/grammar.h"

namespace memra::grammar {

// Integers in [lo, hi] written as JSON writes them (no leading zeros, no "-0"); nullopt bounds
// are open. The range must not be empty.
int32_t integer_range_expr(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi);
// Any JSON number.
int32_t any_number_expr(Grammar& g);
// Numbers v with lo <= v <= hi where lo and hi are integers (nullopt: open): integers of the
// range, and decimals whose value lies inside it (no exponent form).
int32_t number_range_expr(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi);
// The content (without quotes) of a JSON string in a known format, or -1 for an unknown format.
int32_t string_format_expr(Grammar& g, std::string_view format);

}  // namespace memra::grammar

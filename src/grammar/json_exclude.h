// Exclusions for JSON Schema's `not` (used by json_schema.cpp): the strings whose decoded value is
// not one of a finite set, and the integers of a range minus a finite set. Both are regular, so
// the grammar stays exact: every output validates and every allowed value can be written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace memra::grammar {

// The content (without quotes) of a JSON string of min_len..max_len code points (max_len < 0:
// unbounded) whose value is none of `excluded` (UTF-8). Characters are written as JSON writes
// them (json_string_chars): each value has one spelling, so excluding a value is excluding a
// spelling. Throws GrammarError when nothing is left.
int32_t string_content_excluding(Grammar& g, const std::vector<std::string>& excluded, int64_t min_len,
                                 int64_t max_len);

// Integers of [lo, hi] (nullopt: open) other than `excluded`. Throws GrammarError when none is left.
int32_t integer_range_excluding(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi,
                                std::vector<int64_t> excluded);

}  // namespace memra::grammar

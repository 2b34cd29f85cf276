// Regular expressions (the ECMAScript subset JSON Schema patterns and vLLM's guided_regex use)
// to grammar expressions: alternation, groups ((...), (?:...), (?<name>...)), quantifiers
// (* + ? {n} {n,} {n,m}, lazy forms accepted: laziness does not change the language), classes
// with ranges and negation, \d \w \s \D \W \S, escapes (\n \t \xHH \uHHHH ...), '.', and ^ / $
// at the ends. The match is a full match (as if anchored): for a JSON Schema pattern, which is
// a search, that produces a subset of the valid strings, so every output still validates.
// Backreferences, lookaround, word boundaries and inline flags are refused with GrammarError.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace memra::grammar {

enum class RegexTarget {
  Raw,         // the text itself, UTF-8
  JsonString,  // the content of a JSON string whose decoded value matches (escapes applied)
};

int32_t regex_expr(Grammar& g, std::string_view pattern, RegexTarget target);

// A grammar whose root matches exactly the strings of `pattern` (guided_regex).
Grammar regex_grammar(std::string_view pattern, Limits limits = {});

}  // namespace memra::grammar

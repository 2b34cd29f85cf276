// Pieces shared by the GBNF and regular-expression parsers: UTF-8 decoding of the source and the
// character-class escapes both formats know.
#pragma once

#include <cstdint>
#include <string_view>

#include "grammar/grammar.h"

namespace memra::grammar {

// Decodes the code point at s[pos] (advancing pos); invalid UTF-8 is a GrammarError naming `what`.
uint32_t next_codepoint(std::string_view s, size_t& pos, const char* what);
// Appends cp's UTF-8 encoding.
void append_utf8(std::string& out, uint32_t cp);
// Reads `digits` hex digits at s[pos] (advancing pos).
uint32_t read_hex(std::string_view s, size_t& pos, int digits, const char* what);

// A JSON string's content as a grammar: each code point of `set` written as JSON writes it
// (printable characters as themselves, '"', '\\' and control characters escaped).
int32_t json_string_chars(Grammar& g, const CodepointSet& set);

}  // namespace memra::grammar

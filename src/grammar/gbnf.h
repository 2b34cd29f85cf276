// GBNF, llama.cpp's grammar format, so grammars written for llama.cpp work unchanged:
//   root ::= "{" ws pair ("," ws pair)* "}"      # comments run to the end of the line
//   pair ::= [a-z]+ ":" ws ( "true" | "false" ) .*?
// Literals "..." and classes [...] / [^...] with escapes \n \t \r \\ \" \] \xHH \uHHHH
// \UHHHHHHHH, '.' (any character), rule references, groups, alternation, and the postfixes
// * + ? {m} {m,} {m,n}. A newline ends a rule's body unless inside parentheses or after '|'.
// The start rule is `root`. Token references (<[id]>, <name>) are refused with GrammarError.
#pragma once

#include <string_view>

#include "grammar/grammar.h"

namespace memra::grammar {

Grammar parse_gbnf(std::string_view text, Limits limits = {});

}  // namespace memra::grammar

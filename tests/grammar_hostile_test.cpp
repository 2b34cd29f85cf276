// Hostile grammars: every one either compiles within the limits or is refused with a
// GrammarError (a 400 in the server) — never a crash, a hang or unbounded memory. Runs under
// AddressSanitizer in CI (.ci/run).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace memra::grammar {
namespace {

using ojson = nlohmann::ordered_json;

template <typename F>
std::string error_of(F&& build) {
  try {
    CompiledGrammar::compile(build());
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "compiled";
}

TEST(GrammarHostile, DeepNesting) {
  ojson s = {{"type", "string"}};
  for (int i = 0; i < 400; ++i) s = {{"type", "array"}, {"items", s}};
  EXPECT_NE(error_of([&] { return json_schema_grammar(s); }).find("nesting deeper"), std::string::npos);
  std::string parens(20000, '(');
  EXPECT_NE(error_of([&] { return parse_gbnf("root ::= " + parens + "\"a\"" + std::string(20000, ')')); }).find("nest"),
            std::string::npos);
  EXPECT_NE(error_of([&] { return regex_grammar(std::string(5000, '(') + "a" + std::string(5000, ')')); }).find("nest"),
            std::string::npos);
  // A long chain of small rules: inlining stops at the size bound, the rest are calls.
  std::string chain = "root ::= r0\n";
  for (int i = 0; i < 3000; ++i) chain += "r" + std::to_string(i) + " ::= \"x\" r" + std::to_string(i + 1) + "\n";
  chain += "r3000 ::= \"y\"\n";
  EXPECT_EQ(error_of([&] { return parse_gbnf(chain); }), "compiled");
}

TEST(GrammarHostile, HugeEnumsAndLiterals) {
  ojson values = ojson::array();
  for (int i = 0; i < 20000; ++i) values.push_back("value-" + std::to_string(i * 7919 % 100003));
  auto g = CompiledGrammar::compile(json_schema_grammar({{"enum", values}}));
  Matcher m(g, test::small_vocab());
  EXPECT_TRUE(m.accept_bytes("\"value-7919\""));
  EXPECT_TRUE(m.can_end());
  ojson many = ojson::array();
  for (int i = 0; i < 300000; ++i) many.push_back("a-rather-long-enum-value-number-" + std::to_string(i));
  EXPECT_NE(error_of([&] { return json_schema_grammar({{"enum", many}}); }).find("too large"), std::string::npos);
}

TEST(GrammarHostile, PathologicalRegexes) {
  // Determinization would need 2^25 states.
  EXPECT_NE(error_of([] { return regex_grammar("(a|b)*a(a|b){24}"); }).find("automaton states"), std::string::npos);
  // Catastrophic for backtracking engines, linear here.
  auto g = CompiledGrammar::compile(regex_grammar("(x+x+)+y"));
  Matcher m(g, test::small_vocab());
  EXPECT_TRUE(m.accept_bytes(std::string(200, 'x') + "y"));
  EXPECT_TRUE(m.can_end());
  EXPECT_NE(error_of([] { return regex_grammar("a{5000}"); }).find("limit"), std::string::npos);
  EXPECT_NE(error_of([] { return regex_grammar("((a{1000}){1000}){1000}"); }).find("too large"), std::string::npos);
  EXPECT_NE(error_of([] { return regex_grammar("(((a*)*)*)*b{2,1}"); }).find("m < n"), std::string::npos);
  EXPECT_EQ(error_of([] { return regex_grammar("(((a*)*)*)*b"); }), "compiled");
  EXPECT_NE(error_of([] { return parse_gbnf("root ::= (\"a\"{3000}){3000}"); }).find("too large"), std::string::npos);
}

TEST(GrammarHostile, RecursiveRefs) {
  EXPECT_NE(error_of([] { return json_schema_grammar(ojson::parse(R"({"$ref": "#"})")); }).find("left-recursive"),
            std::string::npos);
  EXPECT_NE(error_of([] { return json_schema_grammar(ojson::parse(R"({"anyOf": [{"$ref": "#"}, {"type": "null"}]})")); })
                .find("left-recursive"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              return json_schema_grammar(ojson::parse(
                  R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"})"));
            }).find("left-recursive"),
            std::string::npos);
  // A required child of the same type: no finite document matches.
  EXPECT_NE(error_of([] {
              return json_schema_grammar(
                  ojson::parse(R"({"type": "object", "properties": {"child": {"$ref": "#"}}, "required": ["child"]})"));
            }).find("matches no string"),
            std::string::npos);
  // Recursion under a bracket is fine, and nesting is bounded at run time.
  auto g = CompiledGrammar::compile(
      json_schema_grammar(ojson::parse(R"({"type": "object", "properties": {"child": {"$ref": "#"}}})")));
  Matcher m(g, test::small_vocab());
  for (int i = 0; i < 50; ++i) ASSERT_TRUE(m.accept_bytes("{\"child\":"));
  test::expect_mask_exact(m, "50 levels deep");
  // Exponential expansion through references stays linear: each level refers to the previous twice.
  ojson defs = ojson::object();
  defs["d0"] = {{"type", "string"}};
  for (int i = 1; i < 60; ++i)
    defs["d" + std::to_string(i)] = {{"type", "array"},
                                     {"prefixItems", {{{"$ref", "#/$defs/d" + std::to_string(i - 1)}}, {{"$ref", "#/$defs/d" + std::to_string(i - 1)}}}}};
  EXPECT_EQ(error_of([&] { return json_schema_grammar({{"$defs", defs}, {"$ref", "#/$defs/d59"}}); }), "compiled");
}

TEST(GrammarHostile, SizeLimits) {
  std::string many_rules = "root ::= r0\n";
  for (int i = 0; i < 70000; ++i) many_rules += "r" + std::to_string(i) + " ::= \"a\"\n";
  EXPECT_NE(error_of([&] { return parse_gbnf(many_rules); }).find("rules"), std::string::npos);
  EXPECT_NE(error_of([] { return parse_gbnf(std::string(5 << 20, ' ')); }).find("longer than"), std::string::npos);
  EXPECT_NE(error_of([] { return json_schema_grammar(ojson::parse(R"({"type": "string", "maxLength": 100000})")); })
                .find("maxLength"),
            std::string::npos);
  EXPECT_NE(error_of([] { return json_schema_grammar(ojson::parse(R"({"type": "array", "maxItems": 100000})")); })
                .find("maxItems"),
            std::string::npos);
  EXPECT_NE(error_of([] { return json_schema_grammar(ojson::parse(R"({"type": "integer", "maximum": 1e300})")); })
                .find("too large"),
            std::string::npos);
}

TEST(GrammarHostile, ExclusionsAndUniqueArrays) {
  // A huge 'not enum': refused before its complement is built.
  ojson values = ojson::array();
  for (int i = 0; i < 200000; ++i) values.push_back("excluded-value-" + std::to_string(i));
  EXPECT_NE(error_of([&] { return json_schema_grammar({{"type", "string"}, {"not", {{"enum", values}}}}); }).find("too large"),
            std::string::npos);
  // A very long excluded string: refused, no deep recursion.
  EXPECT_NE(error_of([] { return json_schema_grammar({{"type", "string"}, {"not", {{"const", std::string(5000, 'x')}}}}); })
                .find("longer than"),
            std::string::npos);
  // Nested anyOf inside 'not': the nesting limit.
  ojson n = {{"const", "a"}};
  for (int i = 0; i < 400; ++i) n = {{"anyOf", ojson::array({n})}};
  EXPECT_NE(error_of([&] { return json_schema_grammar({{"type", "string"}, {"not", n}}); }).find("nesting"),
            std::string::npos);
  // Unique arrays nested deeply: compiled within the limits, or refused for nesting.
  ojson deep = {{"type", "array"}, {"items", {{"type", "string"}}}, {"uniqueItems", true}};
  for (int i = 0; i < 100; ++i) deep = {{"type", "array"}, {"items", deep}};
  EXPECT_EQ(error_of([&] { return json_schema_grammar(deep); }), "compiled");
  // A long unique array: each completed item is compared with all earlier ones (linear in the
  // text per item), and masks there recheck only the few tokens that could complete an item.
  Matcher m(CompiledGrammar::compile(json_schema_grammar(ojson::parse(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})"))),
            test::small_vocab());
  ASSERT_TRUE(m.accept_bytes("["));
  for (int i = 0; i < 2000; ++i) ASSERT_TRUE(m.accept_bytes((i ? ",\"" : "\"") + std::to_string(i) + "\""));
  EXPECT_FALSE(m.accept_bytes(",\"1999\""));
  ASSERT_TRUE(m.accept_bytes(",\"19"));
  std::vector<uint32_t> mask(m.vocab().mask_words());
  EXPECT_GT(m.fill_mask(mask), 0u);
  EXPECT_FALSE(m.accept_bytes("9\""));  // "199" again
  EXPECT_TRUE(m.accept_bytes("a\"]"));
}

}  // namespace
}  // namespace memra::grammar

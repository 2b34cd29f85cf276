// The grammar engine: masks equal the exact token-by-token check, on a small vocabulary whose
// tokens span terminals, for JSON Schema, any-JSON, GBNF and regular expressions; front-end
// semantics; compile errors.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar_test_util.h"

namespace memra::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using test::expect_mask_exact;
using test::random_walk;
using test::small_vocab;

std::shared_ptr<const CompiledGrammar> compile(const Grammar& g) { return CompiledGrammar::compile(g); }

bool matches(const Grammar& g, const std::string& text) {
  Matcher m(compile(g), small_vocab());
  return (text.empty() || m.accept_bytes(text)) && m.can_end();
}

TEST(GrammarEngine, MaskEqualsExactCheckOnRandomWalks) {
  auto vocab = small_vocab();
  const std::vector<ojson> schemas = {
      ojson::parse(R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]})"),
      ojson::parse(R"({"type":"array","items":{"type":"number"},"minItems":1,"maxItems":3})"),
      ojson::parse(R"({"anyOf":[{"type":"string","maxLength":3},{"type":"boolean"},{"type":"null"}]})"),
      ojson::parse(R"({"type":"object","properties":{"a":{"enum":["yes","no",1,null]},"b":{"type":"string","format":"date"}},"required":["a","b"]})"),
      ojson::parse(R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer","minimum":-5,"maximum":120},"next":{"$ref":"#/$defs/n"}},"required":["v"]}},"$ref":"#/$defs/n"})"),
  };
  for (size_t i = 0; i < schemas.size(); ++i) {
    auto g = compile(json_schema_grammar(schemas[i]));
    for (uint64_t seed = 0; seed < 6; ++seed) {
      Matcher m(g, vocab);
      random_walk(m, seed * 31 + i, 24, /*check=*/true);
    }
  }
  auto any = compile(any_json_grammar({}, false));
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Matcher m(any, vocab);
    random_walk(m, seed, 24, true);
  }
  auto gbnf = compile(parse_gbnf(R"(root ::= item ("," " "? item)* "."?
item ::= "ab"+ | [0-9]{1,3} | "\"" [^"]* "\"" )"));
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Matcher m(gbnf, vocab);
    random_walk(m, seed, 20, true);
  }
  auto re = compile(regex_grammar(R"((ab|ba)+[0-9]{2,4}(x|\u00e9|€)?)"));
  for (uint64_t seed = 0; seed < 6; ++seed) {
    Matcher m(re, vocab);
    random_walk(m, seed, 12, true);
  }
}

TEST(GrammarEngine, SchemaOutputsParseAndHaveTheRightShape) {
  auto vocab = small_vocab();
  auto g = compile(json_schema_grammar(ojson::parse(
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":8},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2},"ok":{"type":"boolean"}},"required":["name","ok"]})")));
  int complete = 0;
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Matcher m(g, vocab);
    bool ended = false;
    const std::string text = random_walk(m, seed, 80, false, &ended);
    if (!ended) continue;
    ++complete;
    const ojson j = ojson::parse(text, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << text;
    ASSERT_TRUE(j.is_object()) << text;
    EXPECT_TRUE(j.contains("name") && j["name"].is_string() && j["name"].get<std::string>().size() <= 8 * 4) << text;
    EXPECT_TRUE(j.contains("ok") && j["ok"].is_boolean()) << text;
    if (j.contains("tags")) {
      EXPECT_LE(j["tags"].size(), 2u) << text;
    }
    for (auto it = j.begin(); it != j.end(); ++it) EXPECT_TRUE(it.key() == "name" || it.key() == "tags" || it.key() == "ok");
  }
  EXPECT_GE(complete, 20);
}

TEST(GrammarEngine, EndTokenOnlyWhereTheGrammarMayEnd) {
  auto vocab = small_vocab();
  const int32_t end = vocab->end_ids()[0];
  Matcher m(compile(regex_grammar("ab|abab")), vocab);
  EXPECT_FALSE(m.allows(end));
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.allows(end));
  EXPECT_TRUE(m.allows('a'));  // single-byte tokens have their byte as id
  ASSERT_TRUE(m.accept_bytes("ab"));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.can_continue());
  EXPECT_TRUE(m.accept_token(end));
  EXPECT_TRUE(m.finished());
  std::vector<uint32_t> mask(vocab->mask_words());
  EXPECT_EQ(m.fill_mask(mask), 0u);
  // Padding ids (no bytes) are never allowed.
  Matcher any(compile(regex_grammar(".*")), vocab);
  EXPECT_FALSE(any.allows(end - 1));
}

TEST(GrammarEngine, TokensSpanningTerminalsAndPartialUtf8) {
  auto vocab = small_vocab();
  Matcher m(compile(json_schema_grammar(ojson::parse(R"({"type":"object","properties":{"name":{"type":"string"}},"required":["name"]})"))),
            vocab);
  auto id_of = [&](const std::string& s) {
    for (int32_t i = 0; i < vocab->n_vocab(); ++i)
      if (vocab->bytes(i) == s) return i;
    ADD_FAILURE() << "no token " << s;
    return -1;
  };
  EXPECT_TRUE(m.allows(id_of("{\"")));
  EXPECT_TRUE(m.accept_token(id_of("{\"")));
  EXPECT_TRUE(m.accept_token(id_of("name")));
  EXPECT_TRUE(m.allows(id_of("\": ")));
  EXPECT_FALSE(m.allows(id_of("\",")));
  EXPECT_TRUE(m.accept_token(id_of("\":")));
  EXPECT_TRUE(m.accept_token(id_of("\"a")));
  EXPECT_TRUE(m.allows(id_of("\xC3")));      // first byte of é
  EXPECT_TRUE(m.accept_token(id_of("\xC3")));
  EXPECT_FALSE(m.allows(id_of("\"}")));     // a character is cut off
  EXPECT_TRUE(m.accept_token(id_of("\xA9")));
  EXPECT_TRUE(m.allows(id_of("\"}")));
  expect_mask_exact(m, "inside a string");
  EXPECT_TRUE(m.accept_token(id_of("\"}")));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarRegex, Semantics) {
  EXPECT_TRUE(matches(regex_grammar(R"(\d{3}-\d{4})"), "555-1234"));
  EXPECT_FALSE(matches(regex_grammar(R"(\d{3}-\d{4})"), "555-123"));
  EXPECT_TRUE(matches(regex_grammar(R"(^(?:cat|dog)s?$)"), "dogs"));
  EXPECT_FALSE(matches(regex_grammar(R"(^(?:cat|dog)s?$)"), "cow"));
  EXPECT_TRUE(matches(regex_grammar(R"([^a-c]+)"), "xyz"));
  EXPECT_FALSE(matches(regex_grammar(R"([^a-c]+)"), "xaz"));
  EXPECT_TRUE(matches(regex_grammar(R"(\w+@\w+\.com)"), "a_1@b.com"));
  EXPECT_TRUE(matches(regex_grammar("é+"), "éé"));
  EXPECT_TRUE(matches(regex_grammar(R"(a{2,}b*?)"), "aaab"));
  EXPECT_TRUE(matches(regex_grammar(R"(x{,3})"), "x{,3}"));  // not a quantifier: literal
  EXPECT_TRUE(matches(regex_grammar(R"([\]\-]+)"), "]-]"));
  EXPECT_TRUE(matches(regex_grammar(R"(.)"), "€"));
  EXPECT_FALSE(matches(regex_grammar(R"(.)"), "\n"));
  for (const char* bad : {"(a", "a)", "[a", "(?=a)", "\\1", "a\\b", "*a", "a{3,1}", "(?i)a", "\\p{L}", "a^b"})
    EXPECT_THROW(regex_grammar(bad), GrammarError) << bad;
}

TEST(GrammarGbnf, LlamaCppJsonGrammar) {
  // The grammar llama.cpp ships as grammars/json.gbnf (the format, written out here).
  const char* json_gbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";
  Grammar g = parse_gbnf(json_gbnf);
  EXPECT_TRUE(matches(g, R"({"a": [1, 2.5, {"b": null}], "c": "x\"y"})"));
  EXPECT_FALSE(matches(g, R"({"a": })"));
  auto cg = compile(g);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    Matcher m(cg, small_vocab());
    random_walk(m, seed, 20, true);
  }
}

TEST(GrammarGbnf, SyntaxAndErrors) {
  EXPECT_TRUE(matches(parse_gbnf("root ::= [a-z]+ \"-\" ( \"x\" | \"y\" ){2}\n"), "ab-xy"));
  EXPECT_TRUE(matches(parse_gbnf("root ::= a\na ::= \"\\u00e9\" . [^\\]]"), "é!x"));
  EXPECT_TRUE(matches(parse_gbnf("root ::= \"a\" |\n  \"b\"  # comment\n"), "b"));
  auto err = [](const char* text) {
    try {
      parse_gbnf(text);
      CompiledGrammar::compile(parse_gbnf(text));
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("root ::= foo").find("'foo' is used but never defined"), std::string::npos) << err("root ::= foo");
  EXPECT_NE(err("a ::= \"x\"").find("no 'root' rule"), std::string::npos);
  EXPECT_NE(err("root ::= root \"x\" | \"y\"").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= a\na ::= \"\"? root").find("left-recursive"), std::string::npos);
  EXPECT_NE(err("root ::= \"x").find("unterminated"), std::string::npos);
  EXPECT_NE(err("root ::= [a-").find("unterminated"), std::string::npos);
  EXPECT_NE(err("root ::= <[1000]>").find("token references"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(err("root ::= [] ").find("matches no string"), std::string::npos);
  EXPECT_NE(err("root ::= \"a\"{5000000}").find("limit"), std::string::npos);
}

TEST(GrammarJsonSchema, ValuesAndBounds) {
  auto schema = [](const char* s) { return json_schema_grammar(ojson::parse(s)); };
  EXPECT_TRUE(matches(schema(R"({"type":"integer","minimum":-12,"maximum":305})"), "-12"));
  EXPECT_TRUE(matches(schema(R"({"type":"integer","minimum":-12,"maximum":305})"), "305"));
  EXPECT_FALSE(matches(schema(R"({"type":"integer","minimum":-12,"maximum":305})"), "306"));
  EXPECT_FALSE(matches(schema(R"({"type":"integer","minimum":-12,"maximum":305})"), "-13"));
  EXPECT_FALSE(matches(schema(R"({"type":"integer","minimum":-12,"maximum":305})"), "007"));
  EXPECT_TRUE(matches(schema(R"({"type":"integer","exclusiveMinimum":0})"), "1234567"));
  EXPECT_FALSE(matches(schema(R"({"type":"integer","exclusiveMinimum":0})"), "0"));
  EXPECT_TRUE(matches(schema(R"({"type":"number","minimum":0,"maximum":1})"), "0.75"));
  EXPECT_TRUE(matches(schema(R"({"type":"number","minimum":0,"maximum":1})"), "1"));
  EXPECT_FALSE(matches(schema(R"({"type":"number","minimum":0,"maximum":1})"), "1.5"));
  EXPECT_FALSE(matches(schema(R"({"type":"number","minimum":0,"maximum":1})"), "-0.5"));
  EXPECT_TRUE(matches(schema(R"({"type":"number","minimum":-3,"maximum":-1})"), "-2.5"));
  EXPECT_FALSE(matches(schema(R"({"type":"number","minimum":-3,"maximum":-1})"), "-0.5"));
  EXPECT_TRUE(matches(schema(R"({"type":"number"})"), "-1.5e+10"));
  EXPECT_TRUE(matches(schema(R"({"type":"string","minLength":2,"maxLength":3})"), "\"ab\""));
  EXPECT_FALSE(matches(schema(R"({"type":"string","minLength":2,"maxLength":3})"), "\"abcd\""));
  EXPECT_TRUE(matches(schema(R"({"type":"string","maxLength":2})"), "\"\\n\\\"\""));
  EXPECT_TRUE(matches(schema(R"({"type":"string","pattern":"^[A-Z]{2}\\d+$"})"), "\"AB12\""));
  EXPECT_FALSE(matches(schema(R"({"type":"string","pattern":"^[A-Z]{2}\\d+$"})"), "\"A12\""));
  EXPECT_TRUE(matches(schema(R"({"type":"string","format":"date-time"})"), "\"2024-02-28T23:59:01.5+02:00\""));
  EXPECT_FALSE(matches(schema(R"({"type":"string","format":"date"})"), "\"2024-11-31\""));
  EXPECT_TRUE(matches(schema(R"({"type":"string","format":"uuid"})"), "\"123e4567-e89b-12d3-a456-426614174000\""));
  EXPECT_TRUE(matches(schema(R"({"type":["string","null"]})"), "null"));
  EXPECT_TRUE(matches(schema(R"({"const":{"a":[1,2]}})"), "{\"a\":[1,2]}"));
  EXPECT_TRUE(matches(schema(R"({"enum":["x",2,true]})"), "true"));
  EXPECT_TRUE(matches(schema(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}]})"), "[1, \"a\"]"));
  EXPECT_TRUE(matches(schema(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"maxItems":3})"), "[1,\"a\",true]"));
  EXPECT_FALSE(matches(schema(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":{"type":"boolean"},"maxItems":3})"), "[1,\"a\",true,false]"));
  EXPECT_TRUE(matches(schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2})"), "[1, 2]"));
  EXPECT_FALSE(matches(schema(R"({"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2})"), "[1]"));
  EXPECT_TRUE(matches(schema("{}"), " [1, {\"k\": null}] "));
}

TEST(GrammarJsonSchema, ObjectsRequiredOptionalAndAdditional) {
  const Grammar g = json_schema_grammar(ojson::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]})"));
  EXPECT_TRUE(matches(g, R"({"b": 1})"));
  EXPECT_TRUE(matches(g, R"({"a": 1, "b": 2, "c": 3})"));
  EXPECT_TRUE(matches(g, R"({ "b":2 ,"c":3 })"));
  EXPECT_FALSE(matches(g, R"({"a": 1})"));
  EXPECT_FALSE(matches(g, R"({"a": 1, "c": 3})"));
  EXPECT_FALSE(matches(g, R"({"b": 1, "x": 3})"));
  EXPECT_FALSE(matches(g, R"({"b": 1,})"));
  const Grammar open = json_schema_grammar(ojson::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})"));
  EXPECT_TRUE(matches(open, R"({})"));
  EXPECT_TRUE(matches(open, R"({"zz": "q"})"));
  EXPECT_TRUE(matches(open, R"({"a": 1, "zz": "q", "y": ""})"));
  EXPECT_FALSE(matches(open, R"({"zz": 1})"));
  const Grammar all = json_schema_grammar(ojson::parse(
      R"({"allOf":[{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},{"properties":{"b":{"type":"boolean"}},"required":["b"]}]})"));
  EXPECT_TRUE(matches(all, R"({"a": 1, "b": true})"));
  EXPECT_FALSE(matches(all, R"({"a": 1})"));
}

TEST(GrammarJsonSchema, UnsupportedKeywordsAreNamed) {
  auto err = [](const char* s) {
    try {
      CompiledGrammar::compile(json_schema_grammar(ojson::parse(s)));
    } catch (const GrammarError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err(R"({"type":"object","properties":{"x":{"not":{"pattern":"^a"}}}})").find("'not' at #/properties/x"),
            std::string::npos);
  EXPECT_NE(err(R"({"type":"array","uniqueItems":true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(err(R"({"type":"number","multipleOf":3})").find("'multipleOf'"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"http://example.com/s.json"})").find("$ref"), std::string::npos);
  EXPECT_NE(err(R"({"$ref":"#/$defs/missing"})").find("does not resolve"), std::string::npos);
  EXPECT_NE(err(R"({"type":"wat"})").find("unknown type"), std::string::npos);
  EXPECT_NE(err(R"({"type":"integer","minimum":5,"maximum":4})").find("no integer"), std::string::npos);
  EXPECT_EQ(err(R"({"type":"string","title":"x","description":"y","x-custom":1})"), "no error");
}

}  // namespace
}  // namespace memra::grammar

// JSON Schema keywords beyond the basics: 'not' (of types, const and enum: exact complements)
// and uniqueItems over string items (checked by the matcher on the text). Masks equal the exact
// token-by-token check, outputs validate, and the limits hold for hostile inputs.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "grammar/json_schema.h"
#include "grammar/unique_items.h"
#include "grammar_test_util.h"

namespace memra::grammar {
namespace {

using ojson = nlohmann::ordered_json;
using test::expect_mask_exact;
using test::random_walk;
using test::small_vocab;

std::shared_ptr<const CompiledGrammar> compile_schema(const char* s) {
  return CompiledGrammar::compile(json_schema_grammar(ojson::parse(s)));
}

bool matches(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  Matcher m(g, small_vocab());
  return m.accept_bytes(text) && m.can_end();
}

std::string error_of(const char* s) {
  try {
    compile_schema(s);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "compiled";
}

TEST(GrammarKeywords, NotOfConstEnumAndType) {
  auto nonempty = compile_schema(R"({"type":"string","not":{"const":""}})");
  EXPECT_FALSE(matches(nonempty, R"("")"));
  EXPECT_TRUE(matches(nonempty, R"("a")"));
  auto words = compile_schema(R"({"type":"string","not":{"enum":["ab","abc",""]},"maxLength":4})");
  for (const char* ok : {R"("a")", R"("abcd")", R"("abd")", R"("b")", R"("ba")", R"("\n")"}) EXPECT_TRUE(matches(words, ok)) << ok;
  for (const char* bad : {R"("ab")", R"("abc")", R"("")", R"("abcde")"}) EXPECT_FALSE(matches(words, bad)) << bad;
  auto ints = compile_schema(R"({"type":"integer","minimum":0,"maximum":20,"not":{"enum":[0,7,20,99]}})");
  for (const char* ok : {"1", "6", "8", "19"}) EXPECT_TRUE(matches(ints, ok)) << ok;
  for (const char* bad : {"0", "7", "20", "21"}) EXPECT_FALSE(matches(ints, bad)) << bad;
  auto no_strings = compile_schema(R"({"not":{"type":["string","null"]}})");
  EXPECT_TRUE(matches(no_strings, "12"));
  EXPECT_TRUE(matches(no_strings, R"({"k":"v"})"));
  EXPECT_TRUE(matches(no_strings, "[null]"));
  EXPECT_FALSE(matches(no_strings, R"("s")"));
  EXPECT_FALSE(matches(no_strings, "null"));
  auto no_false = compile_schema(R"({"type":["boolean","null"],"not":{"anyOf":[{"const":false},{"type":"null"}]}})");
  EXPECT_TRUE(matches(no_false, "true"));
  EXPECT_FALSE(matches(no_false, "false"));
  EXPECT_FALSE(matches(no_false, "null"));
  auto enum_minus = compile_schema(R"({"enum":["x","y",3],"not":{"const":"y"}})");
  EXPECT_TRUE(matches(enum_minus, R"("x")"));
  EXPECT_FALSE(matches(enum_minus, R"("y")"));
  // Where no exact grammar exists: a 400 naming the keyword.
  EXPECT_NE(error_of(R"({"type":"string","not":{"pattern":"^a"}})").find("'not'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"number","not":{"const":1}})").find("'not'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","not":{"const":{}}})").find("'not'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"^a+$","not":{"const":"aa"}})").find("'not'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"boolean","not":{"enum":[true,false]}})").find("excludes every"), std::string::npos);
  EXPECT_NE(error_of(R"({"not":true})").find("matches nothing"), std::string::npos);
}

TEST(GrammarKeywords, UniqueItemsHelpersReadTheTextBackwards) {
  std::string v;
  ASSERT_TRUE(decode_json_string(R"(a\u0062\"\n\ud83d\ude00)", v));
  EXPECT_EQ(v, "ab\"\n\xF0\x9F\x98\x80");
  EXPECT_FALSE(decode_json_string(R"(a\)", v));
  EXPECT_TRUE(string_item_is_new(R"(["a", "b")"));
  EXPECT_FALSE(string_item_is_new(R"(["a", "b", "a")"));
  EXPECT_FALSE(string_item_is_new(R"({"k": ["a\"]", "\u0061\"]")"));  // decoded equal
  EXPECT_TRUE(string_item_is_new(R"({"k": [["a"], "a")"));  // the inner array is another one
  EXPECT_TRUE(string_item_is_new(R"(, "a")"));             // no '[' in reach: cannot tell
  EXPECT_FALSE(string_item_is_new(R"("a", "a")"));          // ... unless a duplicate is seen
  std::string_view raw;
  std::vector<std::string> earlier;
  ASSERT_TRUE(open_string_item(R"({"t": ["x", "y\"", "ab)", raw, earlier));
  EXPECT_EQ(raw, "ab");
  EXPECT_EQ(earlier, (std::vector<std::string>{"y\"", "x"}));
  EXPECT_FALSE(open_string_item(R"({"t": ["x", "y"])", raw, earlier));  // not inside a string
  EXPECT_FALSE(open_string_item(R"({"t": "ab)", raw, earlier));          // not an item
}

TEST(GrammarKeywords, UniqueItemsMasksAreExactAndOutputsDistinct) {
  auto vocab = small_vocab();
  const char* schemas[] = {
      R"({"type":"array","items":{"type":"string","maxLength":2},"uniqueItems":true})",
      R"({"type":"object","properties":{"tags":{"type":"array","items":{"enum":["a","ab","b",""]},"uniqueItems":true,"minItems":1}},"required":["tags"]})",
      R"({"type":"array","prefixItems":[{"const":"a"}],"items":{"type":"string","pattern":"^[ab]{0,2}$"},"uniqueItems":true})",
  };
  int complete = 0;
  for (const char* s : schemas) {
    auto g = compile_schema(s);
    for (uint64_t seed = 0; seed < 12; ++seed) {
      Matcher m(g, vocab);
      bool ended = false;
      const std::string text = random_walk(m, seed * 7 + 1, 40, /*check=*/seed < 4, &ended);
      if (!ended) continue;
      ++complete;
      ojson j = ojson::parse(text, nullptr, false);
      ASSERT_FALSE(j.is_discarded()) << text;
      if (j.is_object()) j = j["tags"];
      std::set<std::string> seen;
      for (const auto& x : j) EXPECT_TRUE(seen.insert(x.get<std::string>()).second) << s << ": " << text;
    }
  }
  EXPECT_GE(complete, 18);
  // Token by token: the duplicate is refused whatever its spelling, also inside a larger token.
  Matcher m(compile_schema(R"({"type":"array","items":{"type":"string"},"uniqueItems":true})"), vocab);
  ASSERT_TRUE(m.accept_bytes(R"(["ab", "\n)"));
  expect_mask_exact(m, "after [\"ab\", \"\\n");
  EXPECT_TRUE(m.accept_bytes(R"(", "a)"));
  expect_mask_exact(m, "inside the third item");
  EXPECT_FALSE(m.accept_bytes(R"(b")"));        // "ab" again
  EXPECT_FALSE(m.accept_bytes(R"(\u0062")"));   // "ab" spelled otherwise
  EXPECT_TRUE(m.accept_bytes(R"(bc")"));
  EXPECT_FALSE(m.accept_bytes(R"(, "\n")"));    // "\n" again
  EXPECT_FALSE(m.accept_bytes(R"(, "", "")"));  // a duplicate inside one piece of text
  EXPECT_TRUE(m.accept_bytes(R"(, ""])"));
  EXPECT_TRUE(m.can_end());
}

TEST(GrammarKeywords, UniqueItemsRefusedWhereNotStrings) {
  EXPECT_NE(error_of(R"({"type":"array","items":{"type":"integer"},"uniqueItems":true})").find("'uniqueItems'"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"type":"array","uniqueItems":true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_EQ(error_of(R"({"type":"array","items":{"type":"integer"},"uniqueItems":true,"maxItems":1})"), "compiled");
  EXPECT_EQ(error_of(R"({"type":"array","items":{"anyOf":[{"enum":["a"]},{"type":"string","format":"date"}]},"uniqueItems":true})"),
            "compiled");
}

}  // namespace
}  // namespace memra::grammar

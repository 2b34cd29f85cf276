// Jinja interpreter: undefined semantics, error messages (with line numbers), limits and hostile
// templates. Rendering behaviour itself is checked against the Python reference in
// chat_jinja_cases_test.cpp.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja.h"
#include "gguf/gguf.h"
#include "test_util.h"

namespace {

using memra::chat::jinja::Limits;
using memra::chat::jinja::Template;
using memra::chat::jinja::TemplateError;
using ojson = nlohmann::ordered_json;

const ojson& vars() {
  static const ojson v = ojson::parse(R"({"d": {"a": 1}, "l": [1, 2], "s": "str"})");
  return v;
}

std::string render(const std::string& tpl, const ojson& v = vars(), const Limits& limits = {}) {
  return Template(tpl).render(v, limits);
}

// The message of the TemplateError that rendering `tpl` throws ("" if it does not throw).
std::string error_of(const std::string& tpl, const ojson& v = vars(), const Limits& limits = {}) {
  try {
    render(tpl, v, limits);
  } catch (const TemplateError& e) {
    return e.what();
  }
  return "";
}

double seconds_to_fail(const std::string& tpl, std::string& message, const Limits& limits = {}) {
  auto t0 = std::chrono::steady_clock::now();
  message = error_of(tpl, vars(), limits);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(ChatTemplateJinja, UndefinedPrintsEmptyAndTestsFalse) {
  EXPECT_EQ(render("[{{ nothing }}][{{ d.missing }}][{{ l[5] }}]"), "[][][]");
  EXPECT_EQ(render("{{ nothing is defined }} {{ d.missing is undefined }} {{ nothing == none }}"), "False True False");
  EXPECT_EQ(render("{{ nothing|length }} {{ nothing|default('x') }} {% for i in nothing %}i{% else %}e{% endfor %}"), "0 x e");
  EXPECT_EQ(render("{{ 'a' in nothing }} {{ nothing|items|list }} {{ not nothing }}"), "False [] True");
}

TEST(ChatTemplateJinja, UsingUndefinedIsAnErrorNamingIt) {
  EXPECT_EQ(error_of("{{ nothing.attr }}"), "chat template error at line 1: 'nothing' is undefined");
  EXPECT_EQ(error_of("\n\n{{ d.missing.deeper }}"), "chat template error at line 3: 'dict object' has no attribute 'missing'");
  EXPECT_NE(error_of("{{ nothing + 1 }}").find("'nothing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nothing() }}").find("'nothing' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ nothing < 1 }}").find("'nothing' is undefined"), std::string::npos);
}

TEST(ChatTemplateJinja, SyntaxErrorsNameTheLine) {
  struct Case {
    const char* tpl;
    const char* message;  // exact what()
  };
  const Case cases[] = {
      {"a\n{% for x in l %}\nb", "chat template syntax error at line 3: unexpected end of template: 'for' opened at line 2 was never closed (expected 'endfor')"},
      {"x\ny\n{{ 1 + }}", "chat template syntax error at line 3: expected an expression, got end of print statement '}}'"},
      {"{% frobnicate %}", "chat template syntax error at line 1: unknown tag 'frobnicate'"},
      {"{% if 1 %}\n{% endfor %}", "chat template syntax error at line 2: unexpected 'endfor'; the innermost open block is 'if' (line 1), which expects 'endif'"},
      {"{% endif %}", "chat template syntax error at line 1: unexpected 'endif'"},
      {"\n{{ 'abc }}", "chat template syntax error at line 2: unterminated string literal"},
      {"{# never closed", "chat template syntax error at line 1: missing end of comment tag (#})"},
      {"a\n{{ x", "chat template syntax error at line 2: unexpected end of template: '{{' was never closed with '}}'"},
      {"{{ x $ y }}", "chat template syntax error at line 1: unexpected character '$'"},
      {"{{ (1] }}", "chat template syntax error at line 1: unexpected ']', expected ')'"},
      {"{% break %}", "chat template syntax error at line 1: 'break' outside of a for loop"},
      {"{% include 'other.jinja' %}", "chat template syntax error at line 1: the 'include' tag is not supported in chat templates"},
      {"{% macro m(a, a) %}{% endmacro %}", "chat template syntax error at line 1: macro 'm' has two parameters named 'a'"},
      {"{% set %}", "chat template syntax error at line 1: expected a name, got end of statement '%}'"},
      {"{{ f(a=1, 2) }}", "chat template syntax error at line 1: positional argument follows keyword argument"},
      {"{% raw %}never ended", "chat template syntax error at line 1: missing end of raw directive ({% endraw %})"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.tpl);
    try {
      Template t(c.tpl);
      ADD_FAILURE() << "parsed without error";
    } catch (const TemplateError& e) {
      EXPECT_STREQ(e.what(), c.message);
    }
  }
}

TEST(ChatTemplateJinja, RuntimeErrorsNameTheLine) {
  EXPECT_EQ(error_of("ok\n{{ 1 // 0 }}"), "chat template error at line 2: integer division by zero");
  EXPECT_EQ(error_of("{{ 'a' + 1 }}"), "chat template error at line 1: unsupported operand types for +: 'str' and 'int'");
  EXPECT_EQ(error_of("\n{{ l|frobnicate }}"), "chat template error at line 2: unknown filter 'frobnicate'");
  EXPECT_EQ(error_of("{{ 1 is frobnicated }}"), "chat template error at line 1: unknown test 'frobnicated'");
  EXPECT_EQ(error_of("{% set d.x = 1 %}"),
            "chat template error at line 1: cannot set attribute 'x' on 'd' (dict): only namespace() objects can be modified");
  EXPECT_NE(error_of("{{ l.append(3) }}").find("immutable sandbox"), std::string::npos);
  EXPECT_NE(error_of("{% for a, b in l %}{% endfor %}").find("cannot unpack"), std::string::npos);
  EXPECT_NE(error_of("{{ 9223372036854775807 + 1 }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ l[::0] }}").find("slice step cannot be zero"), std::string::npos);
  EXPECT_NE(error_of("{{ s() }}").find("'str' object is not callable"), std::string::npos);
  EXPECT_NE(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}").find("takes at most 1 argument"), std::string::npos);
  EXPECT_NE(error_of("{{ 1 in 5 }}").find("not iterable"), std::string::npos);
}

TEST(ChatTemplateJinja, RaiseExceptionKeepsTheMessage) {
  EXPECT_EQ(error_of("{% if true %}{{ raise_exception('System message must be at the beginning.') }}{% endif %}"),
            "chat template rejected the request: System message must be at the beginning.");
  // A TemplateError is a memra::Error, which the CLI and server report as a user error.
  EXPECT_THROW(render("{{ raise_exception('x') }}"), memra::Error);
}

TEST(ChatTemplateJinja, VariablesMustBeAnObject) {
  EXPECT_THROW(Template("x").render(ojson::array()), TemplateError);
  EXPECT_EQ(Template("{{ a }}").render(ojson::object()), "");
}

TEST(ChatTemplateJinja, StrftimeNowFormatsTheClock) {
  std::string year = render("{{ strftime_now('%Y') }}");
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

TEST(ChatTemplateJinja, GenerationBlocksAndLoopChanged) {
  // transformers' {% generation %} only marks assistant text for training masks.
  EXPECT_EQ(render("a{% generation %}b{{ s }}{% endgeneration %}c"), "abstrc");
  EXPECT_EQ(render("{% for x in [1, 1, 2] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}"), "12");
}

TEST(ChatTemplateJinja, KeyOrderOfInputIsKept) {
  ojson v = ojson::parse(R"({"t": {"zeta": 1, "alpha": {"y": 2, "b": 3}}})");
  EXPECT_EQ(render("{{ t|tojson }} {% for k in t %}{{ k }}{% endfor %}", v), R"({"zeta": 1, "alpha": {"y": 2, "b": 3}} zetaalpha)");
}

// ---- hostile templates: a clear error, quickly, never a hang or a crash ----

TEST(ChatTemplateHostile, InfiniteMacroRecursion) {
  std::string msg;
  double s = seconds_to_fail("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", msg);
  EXPECT_NE(msg.find("macro calls nested more than 64 deep"), std::string::npos) << msg;
  EXPECT_LT(s, 10.0);
  // Mutual recursion through two macros, and a recursive loop that never shrinks.
  EXPECT_NE(error_of("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}").find("nested"),
            std::string::npos);
  EXPECT_NE(error_of("{% for x in [[1]] recursive %}{{ loop([x]) }}{% endfor %}").find("nested"), std::string::npos);
}

TEST(ChatTemplateHostile, GiantLoopsHitTheWorkLimit) {
  std::string msg;
  double s = seconds_to_fail("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", msg);
  EXPECT_NE(msg.find("work limit"), std::string::npos) << msg;
  EXPECT_LT(s, 30.0);
  s = seconds_to_fail("{% for i in range(1000000000) %}{% endfor %}", msg);
  EXPECT_NE(msg.find("a list would grow past"), std::string::npos) << msg;
  EXPECT_LT(s, 5.0);
  // The limit is the caller's to set.
  Limits tight;
  tight.max_work = 1000;
  EXPECT_NE(error_of("{% for i in range(500) %}{{ i }}{% endfor %}", vars(), tight).find("work limit (1000 steps)"),
            std::string::npos);
  EXPECT_EQ(error_of("{% for i in range(50) %}{{ i }}{% endfor %}", vars(), tight), "");
}

TEST(ChatTemplateHostile, GrowingStringsAndListsAreCapped) {
  std::string msg;
  double s = seconds_to_fail(
      "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", msg);
  EXPECT_NE(msg.find("a string would grow past 16777216 bytes"), std::string::npos) << msg;
  EXPECT_LT(s, 10.0);
  EXPECT_NE(error_of("{{ 'x' * 1000000000000 }}").find("a string would grow past"), std::string::npos);
  EXPECT_NE(error_of("{{ [1, 2] * 1000000000000 }}").find("a list would grow past"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}")
                .find("a list would grow past"),
            std::string::npos);
  EXPECT_NE(error_of("{{ 'ab'|replace('', 'x' * 10000000) }}").find("a string would grow past"), std::string::npos);
}

TEST(ChatTemplateHostile, OutputIsCapped) {
  Limits small;
  small.max_output_bytes = 1000;
  EXPECT_EQ(error_of("{% for i in range(200) %}0123456789{% endfor %}", vars(), small),
            "chat template error at line 1: rendered text exceeds 1000 bytes");
  EXPECT_EQ(render("{% for i in range(99) %}0123456789{% endfor %}", vars(), small).size(), 990u);
}

TEST(ChatTemplateHostile, DeepNestingIsASyntaxError) {
  const int n = 100000;
  std::string parens = "{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}";
  std::string chain = "{{ 1";
  for (int i = 0; i < n; ++i) chain += " + 1";
  chain += " }}";
  std::string nots = "{{ ";
  for (int i = 0; i < n; ++i) nots += "not ";
  nots += "1 }}";
  std::string filters = "{{ s";
  for (int i = 0; i < n; ++i) filters += "|trim";
  filters += " }}";
  std::string ifs, endifs;
  for (int i = 0; i < 10000; ++i) ifs += "{% if 1 %}", endifs += "{% endif %}";
  for (const std::string& tpl : {parens, chain, nots, filters, "{{ " + std::string(n, '-') + "1 }}"})
    EXPECT_NE(error_of(tpl).find("expression nested more than 200 levels deep"), std::string::npos);
  EXPECT_NE(error_of(ifs + endifs).find("blocks nested more than 64 levels deep"), std::string::npos);
  // Moderate nesting is fine.
  EXPECT_EQ(render("{{ " + std::string(50, '(') + "7" + std::string(50, ')') + " }}"), "7");
}

TEST(ChatTemplateHostile, DeepInputAndSelfReferenceAreErrors) {
  const int n = 100000;
  ojson deep = ojson::parse("{\"x\": " + std::string(n, '[') + std::string(n, ']') + "}");
  std::string msg = error_of("{{ x|tojson }}", deep);
  EXPECT_NE(msg.find("nested more than 256 levels deep"), std::string::npos) << msg;
  // A namespace that contains itself cannot be printed or serialised forever.
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}").find("nested more than"), std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns|tojson }}").find("not JSON serializable"),
            std::string::npos);
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns == ns.me }}"), "True");
  // Chains built one level per iteration are cut off when built, not when printed or freed.
  EXPECT_NE(error_of("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}")
                .find("value nested more than 256 levels deep"),
            std::string::npos);
  EXPECT_NE(error_of("{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'k': ns.x} %}{% endfor %}")
                .find("value nested more than 256 levels deep"),
            std::string::npos);
}

TEST(ChatTemplateHostile, MacroCalledAfterItsScopeEnded) {
  std::string msg = error_of(
      "{% set ns = namespace() %}{% for i in [1] %}{% macro m() %}in{% endmacro %}{% set ns.m = m %}{% endfor %}"
      "{{ ns.m() }}");
  EXPECT_NE(msg.find("called after the scope that defined it ended"), std::string::npos) << msg;
}

// Random mutations of a real template: each must render or fail with a TemplateError (a crash,
// hang or any other exception fails the test).
TEST(ChatTemplateHostile, MutatedQwenTemplate) {
  auto file = memra::gguf::File::open(memra::test::fixture("qwen3-vocab.gguf"));
  const std::string base(file->get_string("tokenizer.chat_template"));
  ojson v = ojson::parse(R"({"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "<think>r</think>a", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
    {"role": "tool", "content": "t"}], "tools": [{"type": "function", "function": {"name": "f"}}],
    "add_generation_prompt": true})");
  const std::string alphabet = "{}%#-+()[]|.,'\"=<>~ \nabcdefi";
  std::mt19937 rng(1234);
  int rendered = 0, errors = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    std::string t = base;
    int edits = 1 + int(rng() % 4);
    for (int k = 0; k < edits && !t.empty(); ++k) {
      size_t pos = rng() % t.size();
      switch (rng() % 3) {
        case 0: t[pos] = alphabet[rng() % alphabet.size()]; break;
        case 1: t.erase(pos, 1 + rng() % 8); break;
        default: t.insert(pos, 1, alphabet[rng() % alphabet.size()]);
      }
    }
    try {
      Template(t).render(v);
      ++rendered;
    } catch (const TemplateError&) {
      ++errors;
    }
  }
  // Both outcomes occur, so the mutations exercise the parser and the evaluator.
  EXPECT_GT(rendered, 100);
  EXPECT_GT(errors, 100);
}

}  // namespace

// Structured output through the scheduler and the API layer, on the CPU backend with the tiny
// fixture model: constrained sequences are bit-identical alone and batched with free ones, the
// lean and full-logits sampling paths agree under masks, a dead end finishes the request with
// its own reason, and the request fields parse (or get a 400 naming the field).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "engine/engine.h"
#include "serve/openai_api.h"
#include "serve/scheduler.h"
#include "serve_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {
namespace {

using namespace std::chrono_literals;
using ojson = nlohmann::ordered_json;

class GrammarServe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = fixtures::open_tiny_engine(2048); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }

  struct Result {
    std::string text;
    FinishReason finish = FinishReason::None;
    int32_t tokens = 0;
    std::string error;
  };

  static std::vector<Result> collect(const std::shared_ptr<RequestStream>& s) {
    std::vector<Result> r(static_cast<size_t>(s->n_choices()));
    std::vector<ChoiceEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + 120s;
    while (s->wait(events, 200ms)) {
      for (auto& e : events) {
        Result& x = r[static_cast<size_t>(e.choice)];
        x.text += e.text;
        if (e.finish != FinishReason::None) x.finish = e.finish, x.tokens = e.completion_tokens, x.error = e.error;
      }
      events.clear();
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "request did not finish within 120 s";
        s->cancel();
        break;
      }
    }
    return r;
  }

  static GenerationSpec spec(const std::string& prompt, int max_tokens, float temperature, uint64_t seed,
                             std::shared_ptr<const grammar::CompiledGrammar> g) {
    GenerationSpec s;
    s.prompt = engine_->tokenizer().encode(prompt);
    s.max_tokens = max_tokens;
    s.sampling.temperature = temperature;
    s.sampling.seed = seed;
    s.grammar = std::move(g);
    return s;
  }

  static std::shared_ptr<RequestStream> submit(Scheduler& sched, GenerationSpec s) {
    std::shared_ptr<RequestStream> stream;
    EXPECT_EQ(sched.submit(std::move(s), stream), SubmitStatus::Accepted);
    return stream;
  }

  // Whether `text` is a complete match of grammar g.
  static bool complete_match(const std::shared_ptr<const grammar::CompiledGrammar>& g, const std::string& text) {
    grammar::Matcher m(g, grammar::TokenVocab::from_tokenizer(engine_->tokenizer()));
    return (text.empty() || m.accept_bytes(text)) && m.can_end();
  }

  static Engine* engine_;
};

Engine* GrammarServe::engine_ = nullptr;

std::shared_ptr<const grammar::CompiledGrammar> schema_grammar() {
  return grammar::CompiledGrammar::compile(grammar::json_schema_grammar(ojson::parse(R"({
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 6}, "n": {"type": "integer", "minimum": 0, "maximum": 99},
                   "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}},
    "required": ["name", "n", "ok"]})")));
}

TEST_F(GrammarServe, ConstrainedSequencesAreExactAloneAndBatched) {
  const auto json_g = schema_grammar();
  const auto regex_g = grammar::CompiledGrammar::compile(grammar::regex_grammar("(ab|cd)+-[0-9]{2,3}"));
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  const GenerationSpec a = spec("Write JSON:", 400, 1.0f, 7, json_g);
  const GenerationSpec b = spec("Code:", 40, 0.0f, 0, regex_g);
  const Result alone_a = collect(submit(sched, a))[0];
  const Result alone_b = collect(submit(sched, b))[0];
  ASSERT_EQ(alone_a.finish, FinishReason::Stop) << alone_a.error << " " << alone_a.text;
  EXPECT_TRUE(complete_match(json_g, alone_a.text)) << alone_a.text;
  const ojson parsed = ojson::parse(alone_a.text, nullptr, false);
  ASSERT_TRUE(parsed.is_object()) << alone_a.text;
  EXPECT_TRUE(parsed["ok"].is_boolean() && parsed["n"].is_number_integer() && parsed["name"].is_string());
  ASSERT_EQ(alone_b.finish, FinishReason::Stop) << alone_b.text;
  EXPECT_TRUE(complete_match(regex_g, alone_b.text)) << alone_b.text;

  // The same requests among free ones (greedy and sampled) and each other, several times.
  for (int round = 0; round < 2; ++round) {
    std::vector<std::shared_ptr<RequestStream>> others;
    others.push_back(submit(sched, spec("Once upon a time", 30, 0.0f, 0, nullptr)));
    auto sa = submit(sched, a);
    others.push_back(submit(sched, spec("The weather", 25, 0.9f, 3 + static_cast<uint64_t>(round), nullptr)));
    auto sb = submit(sched, b);
    GenerationSpec n2 = a;
    n2.n = 2;
    auto s2 = submit(sched, n2);
    EXPECT_EQ(collect(sa)[0].text, alone_a.text);
    EXPECT_EQ(collect(sb)[0].text, alone_b.text);
    const auto two = collect(s2);
    EXPECT_EQ(two[0].text, alone_a.text);  // choice 0 uses the request's seed
    EXPECT_EQ(two[1].finish, FinishReason::Stop);
    EXPECT_TRUE(complete_match(json_g, two[1].text)) << two[1].text;
    for (auto& o : others) collect(o);
  }
}

TEST_F(GrammarServe, FullLogitsPathAgreesWithLeanPath) {
  const auto g = schema_grammar();
  SchedulerOptions full;
  full.lean_sampling = false;
  Scheduler lean_sched(*engine_, {}, nullptr), full_sched(*engine_, full, nullptr);
  lean_sched.start();
  full_sched.start();
  for (uint64_t seed : {1u, 2u}) {
    const Result x = collect(submit(lean_sched, spec("JSON please", 400, 0.8f, seed, g)))[0];
    const Result y = collect(submit(full_sched, spec("JSON please", 400, 0.8f, seed, g)))[0];
    EXPECT_EQ(x.text, y.text);
    EXPECT_EQ(x.finish, y.finish);
  }
}

TEST_F(GrammarServe, DeadEndFinishesWithItsOwnReason) {
  // Nesting deeper than the matcher's stack limit: both alternatives need one more level (the
  // recursive `inner` is a call, not inlined), so at the limit no token can continue.
  const auto g = grammar::CompiledGrammar::compile(
      grammar::parse_gbnf(R"g(root ::= "(" root ")" | "<" inner ">"
inner ::= "y" | "y" inner)g"));
  const auto open = engine_->tokenizer().find("(");
  ASSERT_TRUE(open.has_value());
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  GenerationSpec s = spec("(", 1800, 0.0f, 0, g);
  s.sampling.logit_bias = {{*open, 100.0f}};
  const Result r = collect(submit(sched, s))[0];
  EXPECT_EQ(r.finish, FinishReason::GrammarDeadEnd) << r.error;
  EXPECT_GT(r.tokens, 900);
  EXPECT_LT(r.tokens, 1100);
  EXPECT_STREQ(finish_reason_name(FinishReason::GrammarDeadEnd), "grammar_dead_end");
}

class GrammarApi : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tiny_ = fixtures::open_tiny_api_model(256, 4); }
  static void TearDownTestSuite() {
    delete tiny_;
    tiny_ = nullptr;
  }
  static ApiRequest chat(const std::string& extra) {
    return parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}], )" + extra + "}", tiny_->model);
  }
  static std::pair<std::string, std::string> rejected(const std::string& extra, bool completions = false) {
    try {
      if (completions) parse_completion_request(R"({"prompt": "hi", )" + extra + "}", tiny_->model);
      else chat(extra);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      return {e.param, e.what()};
    }
    return {"accepted", ""};
  }
  static fixtures::TinyApiModel* tiny_;
};

fixtures::TinyApiModel* GrammarApi::tiny_ = nullptr;

constexpr const char* kTools = R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters":
  {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "noop"}}])";

TEST_F(GrammarApi, ConstraintFieldsCompile) {
  const std::vector<std::string> extras = {
       R"("response_format": {"type": "json_object"})",
        R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}})",
        R"("guided_json": {"type": "array"})", R"("guided_json": "{\"type\": \"string\"}")",
        R"("guided_regex": "[a-z]+")", R"("guided_choice": ["yes", "no"])", R"("grammar": "root ::= \"a\"+")",
        R"("guided_grammar": "root ::= [0-9]")", R"("json_schema": {"type": "boolean"})",
        R"("structured_outputs": {"regex": "x+"})", R"("guided_json": {"type": "integer"}, "guided_decoding_backend": "xgrammar")",
        std::string(kTools) + R"(, "tool_choice": "required")",
        std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"};
  for (const std::string& extra : extras) {
    const ApiRequest r = chat(extra);
    EXPECT_NE(r.spec.grammar, nullptr) << extra;
  }
  EXPECT_EQ(chat(R"("response_format": {"type": "text"})").spec.grammar, nullptr);
  EXPECT_EQ(chat(std::string(kTools) + R"(, "tool_choice": "auto")").spec.grammar, nullptr);
  EXPECT_NE(parse_completion_request(R"({"prompt": "x", "guided_regex": "a|b"})", tiny_->model).spec.grammar, nullptr);
}

TEST_F(GrammarApi, BadConstraintsGet400NamingTheField) {
  EXPECT_EQ(rejected(R"("guided_whitespace_pattern": " ")").first, "guided_whitespace_pattern");
  EXPECT_EQ(rejected(R"("guided_foo": 1)").first, "guided_foo");
  EXPECT_EQ(rejected(R"("structured_outputs": {"yaml": "x"})").first, "structured_outputs.yaml");
  EXPECT_EQ(rejected(R"("guided_json": {"type": "object"}, "guided_regex": "a")").first, "guided_regex");
  auto [param, msg] = rejected(R"("guided_json": {"type": "object", "properties": {"a": {"not": {"pattern": "^a"}}}})");
  EXPECT_EQ(param, "guided_json");
  EXPECT_NE(msg.find("'not' at #/properties/a"), std::string::npos) << msg;
  std::tie(param, msg) = rejected(R"("grammar": "root ::= root \"x\"")");
  EXPECT_EQ(param, "grammar");
  EXPECT_NE(msg.find("left-recursive"), std::string::npos) << msg;
  EXPECT_EQ(rejected(R"("guided_regex": "(a")").first, "guided_regex");
  EXPECT_EQ(rejected(R"("guided_choice": [])").first, "guided_choice");
  EXPECT_EQ(rejected(R"("guided_json": 5)").first, "guided_json");
  EXPECT_EQ(rejected(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x"}})").first, "response_format");
  EXPECT_EQ(rejected(R"("response_format": {"type": "yaml"})").first, "response_format");
  EXPECT_EQ(rejected(R"("response_format": {"type": "json_object"})", true).first, "response_format");
  EXPECT_EQ(rejected(R"("tool_choice": "required")").first, "tool_choice");
  EXPECT_EQ(rejected(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})").first,
            "tool_choice");
}

}  // namespace
}  // namespace memra::serve

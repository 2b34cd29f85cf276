// The grammar engine on the real Qwen3 vocabulary (151k byte-level BPE tokens and its added
// tokens): along texts tokenized by the real tokenizer, every mask equals the exact check of
// each token, the text itself is allowed, control tokens never are, end tokens only at the end.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf.h"
#include "grammar/json_schema.h"
#include "grammar/tool_calls.h"
#include "grammar_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::grammar {
namespace {

using ojson = nlohmann::ordered_json;

class GrammarQwenVocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    file_ = gguf::File::open(memra::test::fixture("qwen3-vocab.gguf")).release();
    tok_ = Tokenizer::from_gguf(*file_).release();
    vocab_ = new std::shared_ptr<const TokenVocab>(TokenVocab::from_tokenizer(*tok_));
  }
  static void TearDownTestSuite() {
    delete vocab_;
    delete tok_;
    delete file_;
  }

  // Walks `text` token by token; checks the mask at every `check_every`-th position.
  static void follow(const Grammar& g, const std::string& text, int check_every) {
    Matcher m(CompiledGrammar::compile(g), *vocab_);
    const std::vector<int32_t> ids = tok_->encode(text, /*parse_special=*/false);
    std::vector<uint32_t> mask((*vocab_)->mask_words());
    for (size_t i = 0; i <= ids.size(); ++i) {
      ASSERT_GT(m.fill_mask(mask), 0u) << "dead end after " << i << " tokens";
      if (static_cast<int>(i) % check_every == 0 || i == ids.size()) test::expect_mask_exact(m, text.substr(0, 40) + " @" + std::to_string(i));
      for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
        if (tok_->is_special(id) && !tok_->is_end_of_generation(id)) {
          ASSERT_FALSE((mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u) << id;
        }
      }
      const int32_t next = i < ids.size() ? ids[i] : (*vocab_)->end_ids()[0];
      ASSERT_TRUE((mask[static_cast<size_t>(next) / 32] >> (next % 32)) & 1u)
          << "token " << i << " '" << tok_->token_bytes(next) << "' of the text is not allowed";
      if (i < ids.size()) {
        const int32_t end = (*vocab_)->end_ids()[0];
        EXPECT_FALSE((mask[static_cast<size_t>(end) / 32] >> (end % 32)) & 1u) << "end allowed mid-text at " << i;
      }
      ASSERT_TRUE(m.accept_token(next));
    }
    EXPECT_TRUE(m.finished());
  }

  static gguf::File* file_;
  static Tokenizer* tok_;
  static std::shared_ptr<const TokenVocab>* vocab_;
};

gguf::File* GrammarQwenVocab::file_ = nullptr;
Tokenizer* GrammarQwenVocab::tok_ = nullptr;
std::shared_ptr<const TokenVocab>* GrammarQwenVocab::vocab_ = nullptr;

TEST_F(GrammarQwenVocab, SchemaTextsAllowedAndMasksExact) {
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {
    "name": {"type": "string"}, "email": {"type": "string", "format": "email"},
    "age": {"type": "integer", "minimum": 0, "maximum": 130}, "price": {"type": "number"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
    "status": {"enum": ["active", "inactive"]}, "note": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["name", "age", "status"]})");
  follow(json_schema_grammar(schema),
         R"({"name": "Zoë \"Z\" Ångström", "email": "zoe.a@example.com", "age": 42, "price": -12.5e3, "tags": ["a", "b c"], "status": "active", "note": null})",
         7);
  follow(json_schema_grammar(schema), "{\n  \"name\": \"日本語のテキスト\",\n  \"age\": 7,\n  \"status\": \"inactive\"\n}", 5);
  follow(any_json_grammar(), R"({"k": [1, 2.5, {"x": "y"}, true, null], "emoji": "😀"})", 6);
}

TEST_F(GrammarQwenVocab, UniqueItemsAndNotMasksExact) {
  // Items that are prefixes of earlier ones, a tag spelled with an escape, and tokens such as
  // '","' that close one item and open the next: every mask equals the exact check.
  const ojson schema = ojson::parse(R"({"type": "object", "properties": {
    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
    "label": {"type": "string", "not": {"enum": ["", "none"]}}}, "required": ["tags", "label"]})");
  follow(json_schema_grammar(schema), R"({"tags": ["alpha", "alp", "al", "\u0061l2", "a","b"], "label": "non"})", 1);
}

TEST_F(GrammarQwenVocab, ToolCallsUseTheAddedTokens) {
  const ojson tools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}}])");
  const std::string json_call = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
  // The added token <tool_call> is one token here, as the tokenizer reads it.
  ASSERT_EQ(tok_->encode(json_call, false)[0], *tok_->find("<tool_call>"));
  follow(tool_call_grammar(tools, ToolCallFormat::Json, true), json_call, 4);
  follow(tool_call_grammar(tools, ToolCallFormat::Xml, false),
         "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
         "</function>\n</tool_call>",
         4);
}

}  // namespace
}  // namespace memra::grammar

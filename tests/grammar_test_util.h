// Helpers for the grammar tests: small vocabularies, the exact token-by-token oracle, and
// random walks that generate text through the masks.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar/compiled_grammar.h"
#include "grammar/matcher.h"
#include "grammar/token_vocab.h"

namespace memra::grammar::test {

// A vocabulary whose tokens span terminals in every way: single bytes (all 256, so every text
// can be spelled), JSON punctuation runs, words, partial UTF-8 and an end token (last id).
inline std::shared_ptr<TokenVocab> small_vocab() {
  std::vector<std::string> t;
  for (int b = 0; b < 256; ++b) t.push_back(std::string(1, static_cast<char>(b)));
  for (const char* s : {"{\"", "\":", "\": ", "\",", "\", \"", "\"}", "}}", "},", "[{", "}]", "]}", ", ", ",\n", "\n  ",
                        "  ", "true", "false", "null", "nu", "ll", "12", "345", "0.", ".5", "-1", "e+", "1e", "\"a", "abc",
                        "name", "\"name\"", "\"age\": ", "age", "hello", " world", "\\n", "\\\"", "\\u00", "2024",
                        "-01-", "T12", ":00", "Z\"", "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82", "\xE2\x82\xAC\"", "\"\n",
                        "x\"}", "1,", "1}", "]\n", "yes", "no", "<tool_call>", "\n{\"name\": \"", "\"arguments\": ",
                        "}\n</tool_call>", "=====", "aaaa", "ab", "ba"})
    t.push_back(s);
  t.push_back("");  // a padding id no grammar may produce
  t.push_back("<|end|>");
  const int32_t end = static_cast<int32_t>(t.size() - 1);
  return std::make_shared<TokenVocab>(std::move(t), std::vector<int32_t>{end});
}

// fill_mask must equal allows() for every token.
inline void expect_mask_exact(Matcher& m, const std::string& where) {
  std::vector<uint32_t> mask(m.vocab().mask_words());
  const size_t count = m.fill_mask(mask);
  size_t expected = 0, mismatches = 0;
  for (int32_t id = 0; id < m.vocab().n_vocab(); ++id) {
    const bool in_mask = (mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u;
    const bool ok = m.allows(id);
    expected += ok;
    if (in_mask != ok && ++mismatches <= 5)
      ADD_FAILURE() << where << ": token " << id << " '" << m.vocab().bytes(id) << "' mask says " << in_mask
                    << ", exact check says " << ok;
  }
  EXPECT_EQ(count, expected) << where;
}

// Generates by choosing uniformly among the allowed tokens (checking every mask against the
// oracle when `check` is set); returns the text, or stops at max_tokens. `ended`: reached the end
// token.
inline std::string random_walk(Matcher& m, uint64_t seed, int max_tokens, bool check, bool* ended = nullptr,
                               bool prefer_end = true) {
  std::mt19937_64 rng(seed);
  std::string text;
  std::vector<uint32_t> mask(m.vocab().mask_words());
  if (ended) *ended = false;
  for (int step = 0; step < max_tokens; ++step) {
    if (check) expect_mask_exact(m, "step " + std::to_string(step) + " after '" + text + "'");
    const size_t n = m.fill_mask(mask);
    if (n == 0) break;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < m.vocab().n_vocab(); ++id)
      if ((mask[static_cast<size_t>(id) / 32] >> (id % 32)) & 1u) allowed.push_back(id);
    int32_t pick = allowed[rng() % allowed.size()];
    // Past half the budget, steer towards the end: finish when possible, else prefer tokens that
    // close strings, objects and arrays.
    if (prefer_end && step > max_tokens / 2) {
      if (m.can_end()) {
        pick = m.vocab().end_ids()[0];
      } else {
        int best = -1;
        for (int32_t id : allowed) {
          int score = 0;
          for (char c : m.vocab().bytes(id)) score += (c == '"' || c == '}' || c == ']') ? 4 : -1;
          score = score * 64 + static_cast<int>(rng() % 64);
          if (score > best) best = score, pick = id;
        }
      }
    }
    EXPECT_TRUE(m.accept_token(pick));
    if (m.vocab().is_end(pick)) {
      if (ended) *ended = true;
      break;
    }
    text += m.vocab().bytes(pick);
  }
  return text;
}

}  // namespace memra::grammar::test

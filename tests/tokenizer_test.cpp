// Tokenizer tests: ids against the Hugging Face reference (real Qwen3 vocab, the tiny fixture
// vocabs, the demo model), round trips, special tokens, streaming decode, hostile input and the
// errors for unsupported metadata.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "gguf/gguf.h"
#include "test_util.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace memra {
namespace {

using Json = nlohmann::json;

Json read_json(const std::string& path) {
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  return Json::parse(f);
}

// Loads through memra's own GGUF reader. Files and tokenizers are cached per path: the Qwen3
// vocab takes a noticeable moment to build and many tests share it.
const Tokenizer& load(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(path);
  if (it == cache.end()) {
    std::unique_ptr<gguf::File> file = gguf::File::open(path);
    it = cache.emplace(path, Tokenizer::from_gguf(*file)).first;
  }
  return *it->second;
}

const Tokenizer& qwen3() { return load(test::fixture("qwen3-vocab.gguf")); }
const Tokenizer& tiny() { return load(test::fixture("qwen35-tiny.f32.gguf")); }

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::vector<int32_t> ids_of(const Json& j) { return j.get<std::vector<int32_t>>(); }

// ---- reference ids ----

TEST(TokenizerReference, Qwen3VocabMatchesHuggingFace) {
  const Json cases = read_json(test::fixture("qwen3-tokenizer-cases.json"));
  const Tokenizer& tok = qwen3();
  ASSERT_GE(cases["cases"].size(), 20u);
  for (const Json& c : cases["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(show(tok.encode(text)), show(ids_of(c["ids"]))) << "text: " << Json(text).dump();
  }
}

TEST(TokenizerReference, TinyFixtureVocabs) {
  for (const char* name : {"qwen35-tiny", "qwen35moe-tiny", "qwen3next-tiny", "qwen3-tiny"}) {
    const Json j = read_json(test::fixture(std::string(name) + ".json"));
    const Tokenizer& tok = load(test::fixture(std::string(name) + ".f32.gguf"));
    ASSERT_FALSE(j["tokenizer_cases"].empty()) << name;
    for (const Json& c : j["tokenizer_cases"]) {
      const std::string text = c["text"];
      EXPECT_EQ(show(tok.encode(text)), show(ids_of(c["ids"]))) << name << " text: " << Json(text).dump();
    }
  }
}

TEST(TokenizerReference, DemoModelPromptsAndGreedyText) {
  const Json j = read_json(test::source_path("models/memra-demo-py-14m.json"));
  const Tokenizer& tok = load(test::source_path("models/memra-demo-py-14m.f16.gguf"));
  ASSERT_EQ(j["cases"].size(), 4u);
  for (const Json& c : j["cases"]) {
    const std::string prompt = c["prompt"];
    EXPECT_EQ(show(tok.encode(prompt)), show(ids_of(c["prompt_ids"]))) << "prompt: " << Json(prompt).dump();
    const std::vector<int32_t> greedy = ids_of(c["greedy_ids"]);
    EXPECT_EQ(tok.decode(greedy), c["greedy_text"].get<std::string>());
  }
}

// Edge cases (every kind of Unicode space, combining marks, contractions, NUL, partial specials)
// and random strings, with the ids the Hugging Face tokenizers library gives for a tokenizer
// rebuilt from the same GGUF vocab; both with and without control-token parsing.
TEST(TokenizerReference, HuggingFaceEdgeCases) {
  const Json j = read_json(test::source_path("tests/tokenizer_hf_cases.json"));
  ASSERT_EQ(j["vocabs"].size(), 2u);
  for (const Json& v : j["vocabs"]) {
    const Tokenizer& tok = load(test::fixture(v["file"].get<std::string>()));
    ASSERT_GT(v["cases"].size(), 100u);
    for (const Json& c : v["cases"]) {
      const std::string text = c["text"];
      EXPECT_EQ(show(tok.encode(text, true)), show(ids_of(c["ids"]))) << v["file"] << " text: " << Json(text).dump();
      EXPECT_EQ(show(tok.encode(text, false)), show(ids_of(c["ids_no_special"])))
          << v["file"] << " (no special) text: " << Json(text).dump();
    }
  }
}

TEST(TokenizerReference, Qwen3Metadata) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.n_vocab(), 151936);
  EXPECT_EQ(tok.eos_id(), 151645);
  EXPECT_EQ(tok.bos_id(), -1);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_EQ(tok.find("<|im_start|>"), std::optional<int32_t>(151644));
  EXPECT_EQ(tok.find("Hello"), std::optional<int32_t>(9707));
  EXPECT_EQ(tok.find("no such token"), std::nullopt);
  EXPECT_TRUE(tok.is_end_of_generation(151645));  // <|im_end|>
  EXPECT_TRUE(tok.is_end_of_generation(151643));  // <|endoftext|>
  EXPECT_FALSE(tok.is_end_of_generation(151644));
  EXPECT_FALSE(tok.is_end_of_generation(9707));
  EXPECT_TRUE(tok.is_special(151644));
  EXPECT_FALSE(tok.is_special(151667));  // <think> is user-defined, shown as text
  EXPECT_FALSE(tok.is_special(9707));
  EXPECT_EQ(tok.token_bytes(21927), " Hello");  // "ĠHello" in the byte-level alphabet
  EXPECT_EQ(tok.token_bytes(151667), "<think>");
  EXPECT_EQ(tok.token_bytes(151700), "");  // "[PAD151700]": unused padding entry
  EXPECT_THROW(tok.token_bytes(151936), Error);
  EXPECT_THROW(tok.token_bytes(-1), Error);
}

// ---- round trips and normalization ----

TEST(TokenizerRoundTrip, DecodeOfEncodeIsNfc) {
  std::vector<std::string> texts;
  const Json qwen3_cases = read_json(test::fixture("qwen3-tokenizer-cases.json"));
  const Json tiny_cases = read_json(test::fixture("qwen35-tiny.json"));
  for (const Json& c : qwen3_cases["cases"]) texts.push_back(c["text"]);
  for (const Json& c : tiny_cases["tokenizer_cases"]) texts.push_back(c["text"]);
  ASSERT_GT(texts.size(), 30u);
  for (const Tokenizer* tok : {&qwen3(), &tiny()}) {
    for (const std::string& s : texts) {
      for (bool special : {true, false}) {
        EXPECT_EQ(tok->decode(tok->encode(s, special)), nfc(s)) << Json(s).dump() << " special=" << special;
      }
    }
  }
}

TEST(TokenizerRoundTrip, NfcComposesDecomposedInput) {
  const std::string decomposed = "e\xCC\x81";  // e + U+0301 COMBINING ACUTE ACCENT
  const std::string composed = "\xC3\xA9";     // U+00E9
  EXPECT_EQ(nfc(decomposed), composed);
  EXPECT_EQ(qwen3().encode(decomposed), qwen3().encode(composed));
  EXPECT_EQ(qwen3().decode(qwen3().encode("caf" + decomposed)), "caf" + composed);
}

// ---- special tokens ----

TEST(TokenizerSpecial, ParseSpecialOnAndOff) {
  const Tokenizer& tok = qwen3();
  const std::string text = "<|im_start|>user\nhi<|im_end|>";
  const std::vector<int32_t> on = tok.encode(text, true);
  ASSERT_FALSE(on.empty());
  EXPECT_EQ(on.front(), 151644);
  EXPECT_EQ(on.back(), 151645);
  const std::vector<int32_t> off = tok.encode(text, false);
  for (int32_t id : off) EXPECT_FALSE(tok.is_special(id)) << "control token " << id << " with parse_special=false";
  EXPECT_GT(off.size(), on.size());
  EXPECT_EQ(tok.decode(off), text);
  // "<|im_start|>" as plain text: several ordinary tokens that spell it.
  const std::vector<int32_t> plain = tok.encode("<|im_start|>", false);
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(tok.decode(plain), "<|im_start|>");
  EXPECT_EQ(tok.encode("<|im_start|>", true), std::vector<int32_t>{151644});
}

TEST(TokenizerSpecial, UserDefinedTokensMatchEitherWay) {
  const Tokenizer& tok = qwen3();
  for (bool special : {true, false}) {
    const std::vector<int32_t> ids = tok.encode("<think>\nok\n</think>", special);
    ASSERT_GE(ids.size(), 3u);
    EXPECT_EQ(ids.front(), 151667);
    EXPECT_EQ(ids.back(), 151668);
  }
}

TEST(TokenizerSpecial, AdjacentAndPartialSpecials) {
  const Tokenizer& tok = qwen3();
  EXPECT_EQ(tok.encode("<|im_end|><|im_end|>"), (std::vector<int32_t>{151645, 151645}));
  // A truncated special is plain text and must not swallow what follows.
  const std::vector<int32_t> ids = tok.encode("<|im_end|<|im_end|>");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.back(), 151645);
  EXPECT_EQ(tok.decode(ids), "<|im_end|<|im_end|>");
}

// A hand-made vocab: the byte alphabet, two merges and specials that share a prefix.
BpeVocab small_vocab() {
  BpeVocab v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(byte_level::byte_to_utf8(static_cast<uint8_t>(b)));
  v.types.assign(256, 1);
  v.tokens.push_back("ab");   // 256
  v.tokens.push_back("abc");  // 257
  v.types.insert(v.types.end(), {1, 1});
  v.merges = {"a b", "ab c"};
  v.tokens.push_back("<s>");      // 258, control
  v.tokens.push_back("<s><t>");   // 259, control, longer: must win over <s>
  v.tokens.push_back("<u>");      // 260, user-defined
  v.types.insert(v.types.end(), {3, 3, 4});
  v.pre = "qwen35";
  v.eos_id = 258;
  return v;
}

TEST(TokenizerSpecial, LongestMatchFirst) {
  BpeTokenizer tok(small_vocab());
  EXPECT_EQ(tok.encode("<s><t>"), (std::vector<int32_t>{259}));
  EXPECT_EQ(tok.encode("<s><u>"), (std::vector<int32_t>{258, 260}));
  EXPECT_EQ(tok.encode("abc<s>ab"), (std::vector<int32_t>{257, 258, 256}));
  const std::vector<int32_t> off = tok.encode("<s><u>", false);
  EXPECT_EQ(off.back(), 260);
  EXPECT_EQ(off.size(), 4u);  // '<', 's', '>' as bytes (no merges for them), then <u>
}

TEST(TokenizerSpecial, MergesFollowRank) {
  BpeVocab v = small_vocab();
  EXPECT_EQ(BpeTokenizer(v).encode("abc"), (std::vector<int32_t>{257}));
  v.merges = {"ab c", "a b"};  // "ab c" cannot fire before "ab" exists; the result is the same
  EXPECT_EQ(BpeTokenizer(v).encode("abc"), (std::vector<int32_t>{257}));
  v.merges = {"a b"};
  EXPECT_EQ(BpeTokenizer(v).encode("abc"), (std::vector<int32_t>{256, 'c'}));
  v.merges = {};
  EXPECT_EQ(BpeTokenizer(v).encode("abc").size(), 3u);
}

// ---- pre-tokenizer regexes ----

std::vector<std::string> split(const PreTokenizer& pre, std::string_view text) {
  std::vector<std::pair<size_t, size_t>> ranges;
  pre.split(text, ranges);
  std::vector<std::string> pieces;
  size_t expect_begin = 0;
  for (auto [b, e] : ranges) {
    EXPECT_EQ(b, expect_begin) << "pieces must tile the text";
    expect_begin = e;
    pieces.emplace_back(text.substr(b, e - b));
  }
  EXPECT_EQ(expect_begin, text.size());
  return pieces;
}

TEST(TokenizerPreTokenizer, Qwen35KeepsCombiningMarksWithLetters) {
  // Devanagari vowel signs and the virama are \p{M}: qwen35 keeps the words whole, qwen2 cuts
  // them at every mark (a mark is "punctuation" there, or the optional prefix of a letter run).
  const std::string text = "नमस्ते दुनिया";
  EXPECT_EQ(split(PreTokenizer("qwen35"), text), (std::vector<std::string>{"नमस्ते", " दुनिया"}));
  EXPECT_EQ(split(PreTokenizer("qwen2"), text),
            (std::vector<std::string>{"नमस", "्त", "े", " द", "ुन", "िय", "ा"}));
}

TEST(TokenizerPreTokenizer, SplitsLikeTheReferenceRegex) {
  const PreTokenizer pre("qwen2");
  EXPECT_EQ(split(pre, "I'M here's 123 ab\n\n  x  "),
            (std::vector<std::string>{"I", "'M", " here", "'s", " ", "1", "2", "3", " ab", "\n\n", " ", " x", "  "}));
  // U+00A0 and U+2009 are White_Space; U+200B (zero width space) is not.
  EXPECT_EQ(split(pre, "a\u00A0b\u2009c\u200Bd"), (std::vector<std::string>{"a", "\u00A0b", "\u2009c", "\u200Bd"}));
  // U+180E (Mongolian vowel separator) left White_Space in Unicode 6.3; PCRE2's own \s still
  // takes it, Hugging Face's regex engine does not: it groups with punctuation here.
  EXPECT_EQ(split(pre, "\u180E\u180E?"), (std::vector<std::string>{"\u180E\u180E?"}));
  EXPECT_EQ(split(pre, "x\u0085\u0085"), (std::vector<std::string>{"x", "\u0085\u0085"}));  // NEL is
  EXPECT_TRUE(split(pre, "").empty());
}

// ---- streaming decode ----

TEST(TokenizerStream, NeverEmitsBrokenUtf8) {
  const std::vector<std::string> texts = {
      "emoji 🚀🦙😀👨‍👩‍👧 end", "你好，世界！", "中文 и русский", "こんにちは世界", "한국어 텍스트",
      "مرحبا بالعالم", "Ünïcödé ẞ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
  };
  for (const Tokenizer* tok : {&qwen3(), &tiny()}) {
    size_t held_back = 0;
    for (const std::string& s : texts) {
      const std::vector<int32_t> ids = tok->encode(s);
      StreamDecoder dec(*tok);
      std::string all;
      for (int32_t id : ids) {
        const std::string part = dec.push(id);
        EXPECT_TRUE(utf8::is_valid(part)) << Json(s).dump();
        // A token that does not end on a code point boundary must hold its tail back.
        if (!utf8::is_valid(tok->token_bytes(id))) ++held_back;
        all += part;
      }
      const std::string rest = dec.flush();
      EXPECT_EQ(rest, "");
      all += rest;
      EXPECT_EQ(all, tok->decode(ids));
      EXPECT_EQ(all, s);
    }
    EXPECT_GT(held_back, 0u) << "no token split a code point; the test would prove nothing";
  }
}

int32_t byte_token(const Tokenizer& tok, uint8_t b) {
  std::optional<int32_t> id = tok.find(byte_level::byte_to_utf8(b));
  EXPECT_TRUE(id.has_value());
  return id.value_or(0);
}

TEST(TokenizerStream, InvalidBytesBecomeReplacement) {
  const Tokenizer& tok = tiny();
  StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(byte_token(tok, 0xE4)), "");  // lead byte of a 3-byte sequence: held
  EXPECT_EQ(dec.push(byte_token(tok, 0xB8)), "");
  EXPECT_EQ(dec.flush(), "\xEF\xBF\xBD");  // truncated sequence: one U+FFFD
  EXPECT_EQ(dec.flush(), "");
  EXPECT_EQ(dec.push(byte_token(tok, 0xFF)), "\xEF\xBF\xBD");  // can never be valid: at once
  EXPECT_EQ(dec.push(byte_token(tok, 0xE4)), "");
  EXPECT_EQ(dec.push(byte_token(tok, 'A')), "\xEF\xBF\xBD" "A");  // interrupted sequence
  EXPECT_EQ(dec.push(byte_token(tok, 0xC3)), "");
  EXPECT_EQ(dec.push(byte_token(tok, 0xA9)), "\xC3\xA9");
  EXPECT_EQ(dec.flush(), "");
  EXPECT_THROW(dec.push(tok.n_vocab()), Error);
}

// ---- UTF-8 handling ----

TEST(TokenizerUtf8, SanitizeUsesMaximalSubparts) {
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::sanitize("abc"), "abc");
  EXPECT_EQ(utf8::sanitize("a\xFF" "b"), "a" + R + "b");
  EXPECT_EQ(utf8::sanitize("\xE4\xB8"), R);                 // truncated: one replacement
  EXPECT_EQ(utf8::sanitize("\xE0\x80\x80"), R + R + R);     // overlong lead: each byte alone
  EXPECT_EQ(utf8::sanitize("\xED\xA0\x80"), R + R + R);     // surrogate
  EXPECT_EQ(utf8::sanitize("\xF4\x90\x80\x80"), R + R + R + R);  // above U+10FFFF
  EXPECT_EQ(utf8::sanitize("\xF0\x9F\x9A" "A"), R + "A");   // 3 of 4 bytes, then ASCII
  EXPECT_EQ(utf8::sanitize("\xC0\xAF"), R + R);
  EXPECT_EQ(utf8::sanitize(std::string("\0x", 2)), std::string("\0x", 2));
  EXPECT_TRUE(utf8::is_valid("\xF0\x9F\x9A\x80"));
  EXPECT_FALSE(utf8::is_valid("\xF0\x9F\x9A"));
}

TEST(TokenizerUtf8, ByteLevelAlphabet) {
  EXPECT_EQ(byte_level::byte_to_code_point(' '), 0x120u);   // "Ġ"
  EXPECT_EQ(byte_level::byte_to_code_point('\n'), 0x10Au);  // "Ċ"
  EXPECT_EQ(byte_level::byte_to_code_point('A'), uint32_t{'A'});
  EXPECT_EQ(byte_level::byte_to_code_point(0xAD), 0x143u);
  std::string all;
  for (int b = 0; b < 256; ++b) all += byte_level::byte_to_utf8(static_cast<uint8_t>(b));
  std::string back;
  EXPECT_TRUE(byte_level::decode(all, back));
  ASSERT_EQ(back.size(), 256u);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(static_cast<uint8_t>(back[static_cast<size_t>(b)]), b);
}

// ---- hostile input ----

// Time limits catch quadratic behaviour (which would take minutes on 1 MB), not slow machines:
// sanitizer builds run several times slower, and CI machines are shared.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr double kSlowdown = 15.0;
#else
constexpr double kSlowdown = 1.0;
#endif

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(TokenizerHostile, InvalidUtf8IsReplacedNotFatal) {
  const Tokenizer& tok = qwen3();
  for (std::string s : {std::string("a\xFF" "b"), std::string("\xC3"), std::string("\xE4\xB8\xAD\xE4"),
                        std::string("\x80\x80\x80 hi"), std::string("<|im_end|>\xFE<|im_end|>")}) {
    std::vector<int32_t> ids;
    ASSERT_NO_THROW(ids = tok.encode(s)) << Json::binary({s.begin(), s.end()}).dump();
    EXPECT_EQ(tok.decode(ids), nfc(utf8::sanitize(s)));
  }
  EXPECT_EQ(tok.decode(tok.encode("a\xFF" "b")), "a\xEF\xBF\xBD" "b");
}

TEST(TokenizerHostile, EmbeddedNuls) {
  const Tokenizer& tok = qwen3();
  const char raw[] = "a\0b\0\0 c\0<|im_end|>\0";
  const std::string s(raw, sizeof raw - 1);
  const std::vector<int32_t> ids = tok.encode(s);
  EXPECT_EQ(tok.decode(ids), s);
  EXPECT_NE(std::find(ids.begin(), ids.end(), 151645), ids.end());
  const std::string with_accent("\0e\xCC\x81\0", 5);  // non-ASCII path through utf8proc
  EXPECT_EQ(tok.decode(tok.encode(with_accent)), std::string("\0\xC3\xA9\0", 4));
}

TEST(TokenizerHostile, HugeRunsAreFast) {
  const Tokenizer& tok = qwen3();
  const size_t MB = 1 << 20;
  struct Case {
    const char* what;
    std::string text;
  };
  std::string cjk;
  while (cjk.size() < MB) cjk += "中";
  std::string mixed;
  while (mixed.size() < MB) mixed += "1 a\n\t<|im_";
  const std::vector<Case> cases = {
      {"1 MB of 'a'", std::string(MB, 'a')},
      {"1 MB of spaces", std::string(MB, ' ')},
      {"1 MB of spaces then a word", std::string(MB, ' ') + "word"},
      {"1 MB of digits", std::string(MB, '7')},
      {"1 MB of newlines", std::string(MB, '\n')},
      {"1 MB of '<'", std::string(MB, '<')},
      {"1 MB of one CJK character", cjk},
      {"1 MB of mixed short pieces", mixed},
      {"1 MB of 0xFF bytes", std::string(MB, '\xFF')},
  };
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok.encode(c.text);
    const double dt = seconds_since(t0);
    EXPECT_LT(dt, 2.0 * kSlowdown) << c.what;  // an optimized build takes 0.05 to 0.4 s
    EXPECT_FALSE(ids.empty()) << c.what;
    EXPECT_EQ(tok.decode(ids), nfc(utf8::sanitize(c.text))) << c.what;
  }
  // 1 MB of 'a' must merge into long tokens, not stay bytes.
  EXPECT_LE(tok.encode(std::string(MB, 'a')).size(), MB / 8);
}

TEST(TokenizerHostile, HundredKilobytesOfTextWellUnderASecond) {
  const Tokenizer& tok = qwen3();
  std::string text;
  const Json cases = read_json(test::fixture("qwen3-tokenizer-cases.json"));
  for (const Json& c : cases["cases"]) {
    text += c["text"].get<std::string>() + " ";
  }
  const std::string unit = text;
  ASSERT_GT(unit.size(), 100u);
  while (text.size() < 100 * 1024) text += unit;
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok.encode(text);
  EXPECT_LT(seconds_since(t0), 1.0 * kSlowdown);
  EXPECT_EQ(tok.decode(ids), nfc(text));
}

TEST(TokenizerHostile, ConcurrentEncodeAgrees) {
  // encode() is const and shared by server threads: no hidden mutable state.
  const Tokenizer& tok = qwen3();
  const Json cases = read_json(test::fixture("qwen3-tokenizer-cases.json"));
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> expected;
  for (const Json& c : cases["cases"]) {
    texts.push_back(c["text"]);
    expected.push_back(ids_of(c["ids"]));
  }
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i + static_cast<size_t>(t) * 7) % texts.size();
          if (tok.encode(texts[k]) != expected[k]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ---- metadata errors ----

// A minimal GGUF v3 image with only metadata (no tensors), for the from_gguf error paths.
struct MiniGguf {
  std::vector<uint8_t> b;
  uint64_t n_kv = 0;
  std::vector<uint8_t> kv;

  template <typename T>
  static void put(std::vector<uint8_t>& out, T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    out.insert(out.end(), raw, raw + sizeof(T));
  }
  static void put_str(std::vector<uint8_t>& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
  }
  void key(const std::string& k, gguf::ValueType t) {
    ++n_kv;
    put_str(kv, k);
    put<uint32_t>(kv, static_cast<uint32_t>(t));
  }
  void str(const std::string& k, const std::string& v) {
    key(k, gguf::ValueType::STRING);
    put_str(kv, v);
  }
  void strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, gguf::ValueType::ARRAY);
    put<uint32_t>(kv, static_cast<uint32_t>(gguf::ValueType::STRING));
    put<uint64_t>(kv, v.size());
    for (const auto& s : v) put_str(kv, s);
  }
  void u8s(const std::string& k, const std::vector<uint8_t>& v) {
    key(k, gguf::ValueType::ARRAY);
    put<uint32_t>(kv, static_cast<uint32_t>(gguf::ValueType::U8));
    put<uint64_t>(kv, v.size());
    kv.insert(kv.end(), v.begin(), v.end());
  }
  void u32(const std::string& k, uint32_t v) {
    key(k, gguf::ValueType::U32);
    put<uint32_t>(kv, v);
  }
  std::unique_ptr<gguf::File> open() {
    static constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
    b.assign(kMagic, kMagic + 4);
    put<uint32_t>(b, 3);
    put<uint64_t>(b, 0);  // tensors
    put<uint64_t>(b, n_kv);
    b.insert(b.end(), kv.begin(), kv.end());
    return gguf::File::from_memory(b.data(), b.size(), "mini.gguf");
  }
};

MiniGguf mini_vocab(const std::string& model, const std::string& pre) {
  MiniGguf g;
  g.str("tokenizer.ggml.model", model);
  if (!pre.empty()) g.str("tokenizer.ggml.pre", pre);
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.emplace_back(byte_level::byte_to_utf8(static_cast<uint8_t>(b)));
  tokens.push_back("ab");
  tokens.push_back("<|end|>");
  g.strs("tokenizer.ggml.tokens", tokens);
  g.strs("tokenizer.ggml.merges", {"a b"});
  std::vector<uint8_t> types(258, 1);
  types[257] = 3;
  g.u8s("tokenizer.ggml.token_type", types);  // u8 elements: any integer type is accepted
  return g;
}

std::string error_of(MiniGguf g) {
  try {
    std::unique_ptr<gguf::File> f = g.open();
    Tokenizer::from_gguf(*f);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TokenizerMetadata, SmallVocabThroughReader) {
  MiniGguf g = mini_vocab("gpt2", "qwen2");
  g.u32("tokenizer.ggml.eos_token_id", 257);
  std::unique_ptr<gguf::File> f = g.open();
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_gguf(*f);
  EXPECT_EQ(tok->n_vocab(), 258);
  EXPECT_EQ(tok->eos_id(), 257);
  EXPECT_EQ(tok->encode("ab<|end|>"), (std::vector<int32_t>{256, 257}));
  EXPECT_TRUE(tok->is_special(257));
  EXPECT_TRUE(tok->is_end_of_generation(257));
}

TEST(TokenizerMetadata, UnsupportedValuesNameKeyAndValue) {
  const std::string model = error_of(mini_vocab("llama", "qwen2"));
  EXPECT_NE(model.find("tokenizer.ggml.model"), std::string::npos) << model;
  EXPECT_NE(model.find("\"llama\""), std::string::npos) << model;
  const std::string pre = error_of(mini_vocab("gpt2", "deepseek-llm"));
  EXPECT_NE(pre.find("tokenizer.ggml.pre"), std::string::npos) << pre;
  EXPECT_NE(pre.find("\"deepseek-llm\""), std::string::npos) << pre;
  const std::string missing = error_of(mini_vocab("gpt2", ""));
  EXPECT_NE(missing.find("tokenizer.ggml.pre"), std::string::npos) << missing;
  MiniGguf bad_eos = mini_vocab("gpt2", "qwen35");
  bad_eos.u32("tokenizer.ggml.eos_token_id", 9999);
  const std::string eos = error_of(bad_eos);
  EXPECT_NE(eos.find("tokenizer.ggml.eos_token_id"), std::string::npos) << eos;
  MiniGguf no_tok;
  no_tok.str("general.architecture", "qwen3");
  EXPECT_NE(error_of(no_tok).find("tokenizer.ggml.model"), std::string::npos);
  EXPECT_THROW(PreTokenizer("gpt4o"), Error);
}

TEST(TokenizerMetadata, BadTokenTypeAndMergeAreErrors) {
  BpeVocab v = small_vocab();
  v.types[3] = 42;
  EXPECT_THROW(BpeTokenizer{v}, Error);
  v = small_vocab();
  v.merges.push_back("nospace");
  EXPECT_THROW(BpeTokenizer{v}, Error);
  v = small_vocab();
  v.merges.push_back("zz qq");  // parts not in the vocab: ignored, like a merge that never fires
  EXPECT_NO_THROW(BpeTokenizer{v});
}

}  // namespace
}  // namespace memra

#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace memra {
namespace {

// `\s` spelled out as the Unicode White_Space property, which is what Hugging Face's regex
// engine (Oniguruma) matches. PCRE2's own \s differs at the edges (it also takes U+180E), and
// writing the set out keeps the split independent of the PCRE2 version.
constexpr std::string_view kSpace =
    "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

// The pre-tokenizer regexes of the models' tokenizer.json, verbatim; expand() rewrites their
// \s and \S. Both split digits one by one (\p{N}).
// qwen2: Qwen2 and Qwen3.
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// qwen35: Qwen3.5. Combining marks (\p{M}) stay with the letters they follow and are not
// punctuation; otherwise the same as qwen2.
constexpr std::string_view kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Replaces \s by kSpace (bracketed outside a character class) and \S by its negated class.
std::string expand(std::string_view re) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[++i];
      if (e == 's') {
        out += in_class ? std::string(kSpace) : "[" + std::string(kSpace) + "]";
      } else if (e == 'S') {
        MEMRA_ASSERT(!in_class, "\\S inside a character class is not supported");
        out += "[^" + std::string(kSpace) + "]";
      } else {
        out.push_back(c);
        out.push_back(e);
      }
      continue;
    }
    if (c == '[' && !in_class) in_class = true;
    else if (c == ']' && in_class) in_class = false;
    out.push_back(c);
  }
  return out;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof buf) < 0) return fmt::format("error {}", code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct PreTokenizer::Regex {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Regex() { pcre2_code_free(code); }
};

bool PreTokenizer::supported(std::string_view name) { return name == "qwen2" || name == "qwen35"; }

PreTokenizer::PreTokenizer(std::string_view name) : name_(name), re_(std::make_unique<Regex>()) {
  if (name == "qwen2") {
    pattern_ = expand(kQwen2);
  } else if (name == "qwen35") {
    pattern_ = expand(kQwen35);
  } else {
    fail("unsupported pre-tokenizer: tokenizer.ggml.pre = \"{}\" (memra supports \"qwen2\" and \"qwen35\")",
         name);
  }
  int err = 0;
  PCRE2_SIZE err_off = 0;
  re_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                            PCRE2_UTF | PCRE2_UCP, &err, &err_off, nullptr);
  MEMRA_ASSERT(re_->code != nullptr, "pre-tokenizer regex {} does not compile at {}: {}", name_, err_off,
               pcre2_message(err));
  // JIT is an optimisation only: without it (no JIT support in this libpcre2) the interpreter
  // gives the same matches.
  re_->jit = pcre2_jit_compile(re_->code, PCRE2_JIT_COMPLETE) == 0;
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const {
  if (text.empty()) return;
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> md(
      pcre2_match_data_create_from_pattern(re_->code, nullptr), &pcre2_match_data_free);
  MEMRA_ASSERT(md != nullptr, "out of memory creating PCRE2 match data");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  const size_t n = text.size();
  size_t pos = 0;  // end of the last emitted piece
  size_t from = 0;  // where the next search starts (> pos only after an empty match)
  while (from < n) {
    // NO_UTF_CHECK: the caller passes valid UTF-8, and checking the whole subject on every call
    // would make splitting quadratic.
    int rc = pcre2_match(re_->code, subject, n, from, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH && re_->jit) {
      // A JIT resource limit (e.g. its stack) is not a verdict on the text: retry interpreted.
      rc = pcre2_match(re_->code, subject, n, from, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.get(), nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      fail("pre-tokenizer {} could not split the text at byte {} of {}: {}", name_, from, n, pcre2_message(rc));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
    const size_t begin = ov[0], end = ov[1];
    if (end == begin) {
      // None of our patterns matches empty; should one ever, step over one code point so the
      // loop always advances, and let that code point join the unmatched stretch.
      size_t step = begin;
      utf8::next(text, step);
      from = step;
      continue;
    }
    if (begin > pos) out.emplace_back(pos, begin);
    out.emplace_back(begin, end);
    pos = from = end;
  }
  if (pos < n) out.emplace_back(pos, n);
}

}  // namespace memra

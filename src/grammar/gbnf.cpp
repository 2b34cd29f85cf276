#include "grammar/gbnf.h"

#include <unordered_map>

#include "grammar/text_parse.h"

namespace memra::grammar {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view s, Limits limits) : s_(s), g_(limits) {}

  Grammar parse() {
    if (static_cast<int64_t>(s_.size()) > g_.limits().max_source_bytes)
      grammar_fail("the grammar is longer than {} bytes", g_.limits().max_source_bytes);
    skip_space(true);
    while (pos_ < s_.size()) {
      const std::string name = read_name();
      if (name.empty()) fail_here("expected a rule name");
      skip_space(false);
      if (s_.substr(pos_, 3) != "::=") fail_here("expected '::=' after rule name '" + name + "'");
      pos_ += 3;
      skip_space(true);
      const int32_t rule = rule_id(name);
      if (defined_[static_cast<size_t>(rule)]) fail_here("rule '" + name + "' is defined twice");
      defined_[static_cast<size_t>(rule)] = 1;
      g_.define(rule, alternates(0));
      if (pos_ < s_.size() && s_[pos_] != '\n' && s_[pos_] != '\r') fail_here("unexpected character");
      skip_space(true);
    }
    const int32_t root = g_.find_rule("root");
    if (root < 0 || !defined_[static_cast<size_t>(root)]) grammar_fail("GBNF grammar: no 'root' rule is defined");
    for (size_t r = 0; r < g_.n_rules(); ++r)
      if (!defined_[r]) grammar_fail("GBNF grammar: rule '{}' is used but never defined", g_.rule_name(static_cast<int32_t>(r)));
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  std::string_view s_;
  Grammar g_;
  size_t pos_ = 0;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<char> defined_;

  [[noreturn]] void fail_here(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < s_.size(); ++i) {
      if (s_[i] == '\n') ++line, col = 1;
      else ++col;
    }
    grammar_fail("GBNF grammar, line {} column {}: {}", line, col, what);
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    const int32_t r = g_.add_rule(name);
    ids_.emplace(name, r);
    defined_.push_back(0);
    return r;
  }

  void skip_space(bool newlines) {
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '#') {
        while (pos_ < s_.size() && s_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newlines)) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string read_name() {
    const size_t start = pos_;
    while (pos_ < s_.size() && is_name_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  int32_t alternates(int depth) {
    if (depth > g_.limits().max_nesting) fail_here("groups nest too deeply");
    std::vector<int32_t> alts{sequence(depth)};
    while (pos_ < s_.size() && s_[pos_] == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(sequence(depth));
    }
    return g_.alt(std::move(alts));
  }

  uint32_t escaped_char(const char* what) {
    ++pos_;  // the backslash
    if (pos_ >= s_.size()) fail_here("trailing backslash");
    const char k = s_[pos_++];
    switch (k) {
      case 'x': return read_hex(s_, pos_, 2, what);
      case 'u': return read_hex(s_, pos_, 4, what);
      case 'U': return read_hex(s_, pos_, 8, what);
      case 't': return '\t';
      case 'r': return '\r';
      case 'n': return '\n';
      case '\\': case '"': case '[': case ']': case '-': case '^': return static_cast<uint8_t>(k);
      default: fail_here(std::string("unknown escape \\") + k);
    }
  }

  int32_t sequence(int depth) {
    std::vector<int32_t> parts;
    const bool nested = depth > 0;
    while (pos_ < s_.size()) {
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        std::string lit;
        while (pos_ < s_.size() && s_[pos_] != '"') {
          if (s_[pos_] == '\\') append_utf8(lit, escaped_char("GBNF literal"));
          else append_utf8(lit, next_codepoint(s_, pos_, "the grammar"));
        }
        if (pos_ >= s_.size()) fail_here("unterminated string literal");
        ++pos_;
        parts.push_back(g_.literal(lit));
      } else if (c == '[') {
        ++pos_;
        bool negate = false;
        if (pos_ < s_.size() && s_[pos_] == '^') negate = true, ++pos_;
        CodepointSet set;
        while (pos_ < s_.size() && s_[pos_] != ']') {
          const uint32_t lo = s_[pos_] == '\\' ? escaped_char("GBNF class") : next_codepoint(s_, pos_, "the grammar");
          uint32_t hi = lo;
          if (pos_ + 1 < s_.size() && s_[pos_] == '-' && s_[pos_ + 1] != ']') {
            ++pos_;
            hi = s_[pos_] == '\\' ? escaped_char("GBNF class") : next_codepoint(s_, pos_, "the grammar");
            if (hi < lo) fail_here("character range out of order");
          }
          set.add(lo, hi);
        }
        if (pos_ >= s_.size()) fail_here("unterminated character class");
        ++pos_;
        parts.push_back(g_.codepoints(negate ? set.complement() : set));
      } else if (c == '.') {
        ++pos_;
        CodepointSet any;
        any.add(0, 0x10FFFF);
        parts.push_back(g_.codepoints(any));
      } else if (is_name_char(c)) {
        const std::string name = read_name();
        parts.push_back(g_.ref(rule_id(name)));
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        parts.push_back(alternates(depth + 1));
        if (pos_ >= s_.size() || s_[pos_] != ')') fail_here("expected ')'");
        ++pos_;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (parts.empty()) fail_here(std::string("'") + c + "' has nothing to repeat");
        int32_t lo = 0, hi = -1;
        ++pos_;
        if (c == '+') lo = 1;
        else if (c == '?') hi = 1;
        else if (c == '{') {
          skip_space(false);
          lo = read_count();
          hi = lo;
          skip_space(false);
          if (pos_ < s_.size() && s_[pos_] == ',') {
            ++pos_;
            skip_space(false);
            hi = (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ? read_count() : -1;
            skip_space(false);
          }
          if (pos_ >= s_.size() || s_[pos_] != '}') fail_here("expected '}'");
          ++pos_;
        }
        parts.back() = g_.repeat(parts.back(), lo, hi);
      } else if (c == '<') {
        fail_here("token references (<...>) are not supported");
      } else {
        break;
      }
      skip_space(nested);
    }
    return g_.seq(std::move(parts));
  }

  int32_t read_count() {
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + (s_[pos_++] - '0');
      if (v > g_.limits().max_repeat)
        fail_here(fmt::format("repetition count larger than the limit of {}", g_.limits().max_repeat));
    }
    if (pos_ == start) fail_here("expected a number");
    return static_cast<int32_t>(v);
  }
};

}  // namespace

Grammar parse_gbnf(std::string_view text, Limits limits) { return GbnfParser(text, limits).parse(); }

}  // namespace memra::grammar

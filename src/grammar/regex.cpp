#include "grammar/regex.h"

#include "grammar/text_parse.h"

namespace memra::grammar {

namespace {

class RegexParser {
 public:
  RegexParser(Grammar& g, std::string_view p, RegexTarget t) : g_(g), p_(p), target_(t) {}

  int32_t parse() {
    size_t end = p_.size();
    if (!p_.empty() && p_[0] == '^') pos_ = 1;
    if (end > pos_ && p_[end - 1] == '$' && !escaped_at(end - 1)) end -= 1;
    p_ = p_.substr(0, end);
    const int32_t e = alternation(0);
    if (pos_ != p_.size()) fail_here("unbalanced ')'");
    return e;
  }

 private:
  Grammar& g_;
  std::string_view p_;
  RegexTarget target_;
  size_t pos_ = 0;

  bool escaped_at(size_t i) const {
    size_t n = 0;
    while (i > n && p_[i - n - 1] == '\\') ++n;
    return n % 2 == 1;
  }

  [[noreturn]] void fail_here(const std::string& what) const {
    grammar_fail("regular expression /{}/: {} at position {}", p_, what, pos_);
  }

  bool more() const { return pos_ < p_.size(); }
  char peek() const { return p_[pos_]; }

  int32_t chars(const CodepointSet& s) {
    return target_ == RegexTarget::JsonString ? json_string_chars(g_, s) : g_.codepoints(s);
  }
  int32_t single(uint32_t cp) {
    CodepointSet s;
    s.add(cp, cp);
    return chars(s);
  }

  int32_t alternation(int depth) {
    if (depth > g_.limits().max_nesting) fail_here("groups nest too deeply");
    std::vector<int32_t> alts{concat(depth)};
    while (more() && peek() == '|') {
      ++pos_;
      alts.push_back(concat(depth));
    }
    return g_.alt(std::move(alts));
  }

  int32_t concat(int depth) {
    std::vector<int32_t> parts;
    while (more() && peek() != '|' && peek() != ')') {
      int32_t a = atom(depth);
      a = quantified(a);
      parts.push_back(a);
    }
    return g_.seq(std::move(parts));
  }

  int read_int() {
    int64_t v = 0;
    const size_t start = pos_;
    while (more() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1000000) fail_here("repetition count too large");
      ++pos_;
    }
    if (pos_ == start) return -1;
    return static_cast<int>(v);
  }

  int32_t quantified(int32_t a) {
    while (more()) {
      const char c = peek();
      int32_t lo, hi;
      if (c == '*') lo = 0, hi = -1, ++pos_;
      else if (c == '+') lo = 1, hi = -1, ++pos_;
      else if (c == '?') lo = 0, hi = 1, ++pos_;
      else if (c == '{') {
        const size_t save = pos_;
        ++pos_;
        lo = read_int();
        hi = lo;
        if (lo >= 0 && more() && peek() == ',') {
          ++pos_;
          hi = read_int();  // -1: unbounded
        }
        if (lo < 0 || !more() || peek() != '}') {
          pos_ = save;  // not a quantifier: a literal '{' (as ECMAScript's Annex B reads it)
          return a;
        }
        ++pos_;
        if (hi >= 0 && hi < lo) fail_here("repetition {n,m} with m < n");
      } else {
        return a;
      }
      if (more() && peek() == '?') ++pos_;  // lazy: same language
      else if (more() && peek() == '+') fail_here("possessive quantifiers are not supported");
      a = g_.repeat(a, lo, hi);
    }
    return a;
  }

  int32_t atom(int depth) {
    const char c = peek();
    if (c == '(') {
      ++pos_;
      if (more() && peek() == '?') {
        ++pos_;
        if (more() && peek() == ':') {
          ++pos_;
        } else if (more() && peek() == '<' && pos_ + 1 < p_.size() && p_[pos_ + 1] != '=' && p_[pos_ + 1] != '!') {
          while (more() && peek() != '>') ++pos_;
          if (!more()) fail_here("unterminated group name");
          ++pos_;
        } else {
          fail_here("lookaround and inline flags ((?=, (?!, (?<=, (?i)) are not supported");
        }
      }
      const int32_t e = alternation(depth + 1);
      if (!more() || peek() != ')') fail_here("missing ')'");
      ++pos_;
      return e;
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++pos_;
      CodepointSet s;
      s.add('\n', '\n');
      return chars(s.complement());
    }
    if (c == '^' || c == '$') fail_here("anchors inside the pattern are not supported (only at its ends)");
    if (c == '*' || c == '+' || c == '?') fail_here("nothing to repeat");
    if (c == '\\') {
      CodepointSet s;
      if (escape(s, false)) return chars(s);
      return single(s.ranges[0].first);
    }
    const uint32_t cp = next_codepoint(p_, pos_, "the pattern");
    return single(cp);
  }

  static void add_class(CodepointSet& s, char k) {
    switch (k) {
      case 'd': s.add('0', '9'); break;
      case 'w': s.add('a', 'z'); s.add('A', 'Z'); s.add('0', '9'); s.add('_', '_'); break;
      case 's':
        s.add(' ', ' '); s.add('\t', '\r'); s.add(0xA0, 0xA0); s.add(0x1680, 0x1680); s.add(0x2000, 0x200A);
        s.add(0x2028, 0x2029); s.add(0x202F, 0x202F); s.add(0x205F, 0x205F); s.add(0x3000, 0x3000);
        s.add(0xFEFF, 0xFEFF);
        break;
      default: break;
    }
  }

  // At a backslash: fills `s`; returns true for a class escape (\d, ...), false for one code point.
  bool escape(CodepointSet& s, bool in_class) {
    ++pos_;
    if (!more()) fail_here("trailing backslash");
    const char k = p_[pos_++];
    switch (k) {
      case 'd': case 'w': case 's': add_class(s, k); return true;
      case 'D': case 'W': case 'S': {
        CodepointSet t;
        add_class(t, static_cast<char>(k - 'A' + 'a'));
        s = t.complement();
        return true;
      }
      case 'n': s.add('\n', '\n'); return false;
      case 't': s.add('\t', '\t'); return false;
      case 'r': s.add('\r', '\r'); return false;
      case 'f': s.add('\f', '\f'); return false;
      case 'v': s.add('\v', '\v'); return false;
      case '0': s.add(0, 0); return false;
      case 'x': { const uint32_t v = read_hex(p_, pos_, 2, "regular expression"); s.add(v, v); return false; }
      case 'u': {
        uint32_t v;
        if (more() && peek() == '{') {
          ++pos_;
          v = 0;
          int n = 0;
          while (more() && peek() != '}' && n < 7) v = v * 16 + read_hex(p_, pos_, 1, "regular expression"), ++n;
          if (!more() || peek() != '}') fail_here("bad \\u{...} escape");
          ++pos_;
        } else {
          v = read_hex(p_, pos_, 4, "regular expression");
        }
        s.add(v, v);
        return false;
      }
      case 'b':
        if (in_class) { s.add('\b', '\b'); return false; }
        fail_here("word boundaries (\\b) are not supported");
      case 'B': fail_here("\\B is not supported");
      case 'p': case 'P': fail_here("Unicode property classes (\\p{...}) are not supported");
      default:
        if (k >= '1' && k <= '9') fail_here("backreferences are not supported");
        if ((k >= 'a' && k <= 'z') || (k >= 'A' && k <= 'Z')) fail_here(std::string("unknown escape \\") + k);
        s.add(static_cast<uint8_t>(k), static_cast<uint8_t>(k));
        return false;
    }
  }

  int32_t char_class() {
    ++pos_;
    bool negate = false;
    if (more() && peek() == '^') negate = true, ++pos_;
    CodepointSet s;
    bool first = true;
    while (more() && (peek() != ']' || first)) {
      first = false;
      uint32_t lo;
      if (peek() == '\\') {
        CodepointSet e;
        if (escape(e, true)) {
          for (auto r : e.ranges) s.add(r.first, r.second);
          continue;
        }
        lo = e.ranges[0].first;
      } else {
        lo = next_codepoint(p_, pos_, "the pattern");
      }
      if (pos_ + 1 < p_.size() && peek() == '-' && p_[pos_ + 1] != ']') {
        ++pos_;
        uint32_t hi;
        if (peek() == '\\') {
          CodepointSet e;
          if (escape(e, true)) fail_here("a class escape cannot end a range");
          hi = e.ranges[0].first;
        } else {
          hi = next_codepoint(p_, pos_, "the pattern");
        }
        if (hi < lo) fail_here("range out of order in character class");
        s.add(lo, hi);
      } else {
        s.add(lo, lo);
      }
    }
    if (!more()) fail_here("missing ']'");
    ++pos_;
    return chars(negate ? s.complement() : s);
  }
};

}  // namespace

int32_t regex_expr(Grammar& g, std::string_view pattern, RegexTarget target) {
  if (static_cast<int64_t>(pattern.size()) > g.limits().max_source_bytes)
    grammar_fail("the regular expression is longer than {} bytes", g.limits().max_source_bytes);
  return RegexParser(g, pattern, target).parse();
}

Grammar regex_grammar(std::string_view pattern, Limits limits) {
  Grammar g(limits);
  const int32_t root = g.add_rule("root");
  g.define(root, regex_expr(g, pattern, RegexTarget::Raw));
  g.set_root(root);
  return g;
}

}  // namespace memra::grammar

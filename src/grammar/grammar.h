// The grammar every front end (JSON Schema, GBNF, regular expressions) produces: named rules whose
// bodies are regular expressions over BYTES with references to other rules. Unicode character
// classes are lowered to UTF-8 byte sequences here, so the automata below never see code points
// and a token that stops in the middle of a character is handled like any other byte string.
//
// Expressions live in one arena and are referred to by index; a body is a tree (an index is used
// once), which keeps the automaton construction linear in the size of the grammar.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace memra::grammar {

// A grammar the user sent that we cannot or will not compile (syntax error, unsupported keyword,
// a limit exceeded). The server answers it with 400 and the message.
class GrammarError : public Error {
 public:
  explicit GrammarError(const std::string& message) : Error(message) {}
};

template <typename... Args>
[[noreturn]] inline void grammar_fail(fmt::format_string<Args...> fmt, Args&&... args) {
  throw GrammarError(fmt::format(fmt, std::forward<Args>(args)...));
}

// Limits on what one request may make the compiler build (hostile grammars). Past any of them the
// compile fails with GrammarError naming the limit.
struct Limits {
  int64_t max_exprs = 1 << 19;          // expression nodes in the grammar (~80 bytes each)
  int64_t max_rules = 1 << 16;
  int64_t max_nfa_states = 1 << 20;     // all rules together
  int64_t max_dfa_states = 1 << 19;     // all rules together
  int64_t max_dfa_states_per_rule = 1 << 17;
  int32_t max_repeat = 4096;            // the largest finite bound of a counted repetition
  int32_t max_nesting = 256;            // nesting of the grammar's text (brackets, schema levels)
  int64_t max_source_bytes = 4 << 20;   // a schema / grammar text
};

struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};
  void set(uint8_t b) { w[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1u; }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  ByteSet operator|(const ByteSet& o) const {
    ByteSet r;
    for (int i = 0; i < 4; ++i) r.w[i] = w[i] | o.w[i];
    return r;
  }
  bool operator==(const ByteSet&) const = default;
};

// A set of Unicode scalar values as sorted, disjoint, inclusive ranges.
struct CodepointSet {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  void add(uint32_t lo, uint32_t hi);  // any order, overlaps merged by normalize()
  void normalize();
  CodepointSet complement() const;     // within [0, 0x10FFFF], surrogates excluded
};

enum class ExprKind : uint8_t { Empty, Bytes, Seq, Alt, Repeat, Ref };

struct Expr {
  ExprKind kind = ExprKind::Empty;
  ByteSet bytes;              // Bytes
  std::vector<int32_t> kids;  // Seq, Alt: children; Repeat: one child
  int32_t min = 0, max = 0;   // Repeat: max < 0 is unbounded
  int32_t rule = -1;          // Ref
};

class Grammar {
 public:
  explicit Grammar(Limits limits = {}) : limits_(limits) {}

  // ---- expressions (each returned index must be used at most once) ----
  int32_t empty();
  int32_t bytes(const ByteSet& set);
  int32_t byte_range(uint8_t lo, uint8_t hi);
  int32_t literal(std::string_view text);
  int32_t seq(std::vector<int32_t> kids);
  int32_t alt(std::vector<int32_t> kids);
  int32_t repeat(int32_t kid, int32_t min, int32_t max);  // max < 0: unbounded
  int32_t ref(int32_t rule);
  // UTF-8 encodings of the code points in `set` (an empty set gives an expression matching nothing).
  int32_t codepoints(const CodepointSet& set);
  // A deep copy of expression `e` (to use the same sub-expression twice).
  int32_t clone(int32_t e);

  // ---- rules ----
  // A new rule; `keep` asks the compiler never to inline it (its token sets are then cached
  // under its own structure and shared across grammars: JSON strings, numbers).
  int32_t add_rule(std::string name, bool keep = false);
  int32_t find_rule(std::string_view name) const;  // -1 if none
  void define(int32_t rule, int32_t body);
  // Marks a rule as a JSON array whose items must be distinct (uniqueItems): every rule it calls
  // is one item, a JSON string. The matcher checks each completed item against the earlier ones
  // (stacks.h); such a rule is never inlined.
  void set_unique(int32_t rule) { rules_[static_cast<size_t>(rule)].unique = true; }
  bool rule_unique(int32_t r) const { return rules_[static_cast<size_t>(r)].unique; }
  void set_root(int32_t rule) { root_ = rule; }

  int32_t root() const { return root_; }
  size_t n_rules() const { return rules_.size(); }
  const std::string& rule_name(int32_t r) const { return rules_[static_cast<size_t>(r)].name; }
  int32_t rule_body(int32_t r) const { return rules_[static_cast<size_t>(r)].body; }
  bool rule_keep(int32_t r) const { return rules_[static_cast<size_t>(r)].keep; }
  const Expr& expr(int32_t e) const { return exprs_[static_cast<size_t>(e)]; }
  size_t n_exprs() const { return exprs_.size(); }
  const Limits& limits() const { return limits_; }

 private:
  struct Rule {
    std::string name;
    int32_t body = -1;
    bool keep = false;
    bool unique = false;
  };
  int32_t push(Expr e);
  Limits limits_;
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  int32_t root_ = -1;
};

}  // namespace memra::grammar

// A grammar compiled for matching: every rule that is not inlined becomes a deterministic
// automaton over bytes whose edges are byte ranges or calls of other rules (a pushdown automaton
// once a stack of return states is added; see matcher.h).
//
// Compilation (compile.cpp): rules that are small and not recursive are inlined into their
// callers (whitespace, literals, enums), so that a token crossing them stays inside one automaton;
// every other rule gets its own automaton by subset construction, with limits on its size. Left
// recursion is refused (a top-down matcher would loop on it), as llama.cpp does.
//
// Each state has a structural key: two states with the same key accept the same byte strings
// in the same way (same automaton, same callees), whatever grammar they came from. The token-set
// cache (token_sets.h) is keyed by it, so a JSON string's states are walked once per vocabulary,
// not once per schema.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace memra::grammar {

inline constexpr uint32_t kNoState = 0xFFFFFFFFu;

struct ByteEdge {
  uint8_t lo, hi;
  uint32_t target;
};

struct CallEdge {
  uint32_t rule;
  uint32_t target;  // the state the caller continues in once the callee has matched
};

struct DfaState {
  uint32_t rule = 0;
  bool accepting = false;
  uint32_t edges_begin = 0, edges_end = 0;  // byte edges, sorted by lo, disjoint
  uint32_t calls_begin = 0, calls_end = 0;
  int32_t dense = -1;                        // index of a 256-entry table when there are many edges
};

class CompiledGrammar {
 public:
  // Throws GrammarError (undefined rule, left recursion, a grammar that matches nothing, limits).
  static std::shared_ptr<const CompiledGrammar> compile(const Grammar& g);

  uint32_t step(uint32_t s, uint8_t b) const {
    const DfaState& st = states_[s];
    if (st.dense >= 0) return dense_[static_cast<size_t>(st.dense) * 256 + b];
    for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) {
      const ByteEdge& e = edges_[i];
      if (b < e.lo) return kNoState;
      if (b <= e.hi) return e.target;
    }
    return kNoState;
  }
  const DfaState& state(uint32_t s) const { return states_[s]; }
  bool has_bytes(uint32_t s) const { return states_[s].edges_begin != states_[s].edges_end; }
  const CallEdge* calls_begin(uint32_t s) const { return calls_.data() + states_[s].calls_begin; }
  const CallEdge* calls_end(uint32_t s) const { return calls_.data() + states_[s].calls_end; }
  // A state with nothing left to match: calling into a rule just before it is a tail call.
  bool is_final_only(uint32_t s) const {
    const DfaState& st = states_[s];
    return st.accepting && st.edges_begin == st.edges_end && st.calls_begin == st.calls_end;
  }
  uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  uint32_t root_rule() const { return root_rule_; }
  uint64_t state_key(uint32_t s) const { return state_key_[s]; }
  // Equal for states that match the same byte strings of up to TokenVocab::kShortTokenBytes bytes
  // in the same way (the positions of a long bounded repetition share it).
  uint64_t short_key(uint32_t s) const { return short_key_[s]; }
  size_t n_states() const { return states_.size(); }
  size_t n_rules() const { return rule_start_.size(); }
  const std::string& rule_name(uint32_t rule) const { return rule_names_[rule]; }
  size_t memory_bytes() const;
  // Rules whose callees are items of a JSON array that must be distinct (Grammar::set_unique).
  bool rule_unique(uint32_t rule) const { return !rule_unique_.empty() && rule_unique_[rule]; }
  bool has_unique() const { return !rule_unique_.empty(); }

 private:
  friend class Compiler;
  std::vector<DfaState> states_;
  std::vector<ByteEdge> edges_;
  std::vector<CallEdge> calls_;
  std::vector<uint32_t> dense_;
  std::vector<uint32_t> rule_start_;     // by compiled rule index
  std::vector<std::string> rule_names_;
  std::vector<uint8_t> rule_unique_;     // by compiled rule index; empty when no rule is unique
  std::vector<uint64_t> state_key_, short_key_;
  uint32_t root_rule_ = 0;
};

}  // namespace memra::grammar

// Stacks of a pushdown automaton over a CompiledGrammar. A stack is its top state plus the index
// of the frame below it in an append-only arena of frames (state to return to, frame below that),
// so replacing the top (the common case: one byte inside a rule) allocates nothing, and stacks
// share their lower frames. Every set of stacks is kept "expanded": each top is a state that
// consumes a byte; reaching the end of the outermost rule is reported as a flag instead.
#pragma once

#include <cstdint>
#include <vector>

#include "grammar/compiled_grammar.h"

namespace memra::grammar {

inline constexpr uint32_t kBottom = 0xFFFFFFFFu;  // below the root rule: the grammar is complete
inline constexpr uint32_t kEscape = 0xFFFFFFFEu;  // below the rule a token set is computed for

struct Top {
  uint32_t state;
  uint32_t below;  // frame index, kBottom or kEscape
  bool operator==(const Top&) const = default;
};

struct Frame {
  uint32_t state;
  uint32_t below;
  uint32_t depth;  // frames below it, itself included
};

// Reached while expanding: the bottom (the root rule completed) or the escape marker.
inline constexpr uint8_t kReachedBottom = 1;
inline constexpr uint8_t kReachedEscape = 2;
// Most stacks one set may hold (an ambiguous grammar); past it further alternatives are dropped,
// which can only narrow what is allowed, never admit text the grammar does not match.
inline constexpr size_t kMaxStacks = 4096;

class Stacks {
 public:
  // max_depth: deepest nesting of rule calls; a path that would go deeper is dropped (it bounds
  // recursive grammars, e.g. JSON nesting).
  Stacks(const CompiledGrammar& g, uint32_t max_depth) : g_(g), max_depth_(max_depth) {}

  std::vector<Frame> frames;

  // Adds to `out` the byte-consuming stacks reachable from stack `t` without input; `flags`
  // collects kReachedBottom / kReachedEscape.
  void expand(Top t, std::vector<Top>& out, uint8_t& flags);
  // Steps every stack of `in` over byte b and expands the results into `out` (cleared first,
  // deduplicated). Returns false when nothing survived (out empty and no flag).
  bool advance(const std::vector<Top>& in, uint8_t b, std::vector<Top>& out, uint8_t& flags);

 private:
  void expand_rec(Top t, std::vector<Top>& out, uint8_t& flags, uint32_t depth_guard);
  bool seen(Top t);
  const CompiledGrammar& g_;
  const uint32_t max_depth_;
  std::vector<Top> visited_;
};

}  // namespace memra::grammar

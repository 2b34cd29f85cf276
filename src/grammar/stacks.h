// Stacks of a pushdown automaton over a CompiledGrammar. A stack is its top state plus the index
// of the frame below it in an append-only arena of frames (state to return to, frame below that),
// so replacing the top (the common case: one byte inside a rule) allocates nothing, and stacks
// share their lower frames. Every set of stacks is kept "expanded": each top is a state that
// consumes a byte; reaching the end of the outermost rule is reported as a flag instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/byte_trie.h"
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
  Stacks(const CompiledGrammar& g, uint32_t max_depth)
      : g_(g), max_depth_(max_depth), check_unique_(g.has_unique()) {}

  std::vector<Frame> frames;
  // The text known to precede the stacks' position, ending with the byte just matched: what the
  // uniqueItems check reads (unique_items.h) when an item of a unique array completes. Kept only
  // for grammars with such arrays; walk_trie appends its path to it. An item whose array began
  // before this text is let through here (the matcher checks those tokens with the whole text).
  std::string ctx;
  bool check_unique() const { return check_unique_; }

  // Adds to `out` the byte-consuming stacks reachable from stack `t` without input; `flags`
  // collects kReachedBottom / kReachedEscape.
  void expand(Top t, std::vector<Top>& out, uint8_t& flags);
  // Steps every stack of `in` over byte b and expands the results into `out` (cleared first,
  // deduplicated). Returns false when nothing survived (out empty and no flag).
  bool advance(const std::vector<Top>& in, uint8_t b, std::vector<Top>& out, uint8_t& flags);
  const CompiledGrammar& grammar() const { return g_; }

 private:
  void expand_rec(Top t, std::vector<Top>& out, uint8_t& flags, uint32_t depth_guard);
  bool seen(Top t);
  const CompiledGrammar& g_;
  const uint32_t max_depth_;
  const bool check_unique_;
  std::vector<Top> visited_;
};

// Walks the nodes [begin, end) of `trie` (a whole subtree, or the whole trie) depth first from
// the stacks `start`, which stand at depth `base_depth`, skipping every subtree that no stack
// survives into. Calls on_node(node, depth, alive, flags) for each node where some stack
// survives (alive) or a flag was reached at its last byte; depth counts from base_depth.
// `level` and `mark` are scratch; frames pushed by the walk are dropped before it returns.
template <typename OnNode>
void walk_trie(Stacks& st, const std::vector<Top>& start, const ByteTrie& trie, size_t begin, size_t end,
               uint32_t base_depth, std::vector<std::vector<Top>>& level, std::vector<size_t>& mark, OnNode&& on_node) {
  const size_t levels = trie.max_depth() + 1;
  if (level.size() < levels) level.resize(levels);
  if (mark.size() < levels) mark.resize(levels);
  const size_t base = st.frames.size();
  level[base_depth] = start;
  mark[base_depth] = base;
  const CompiledGrammar& g = st.grammar();
  const bool keep_ctx = st.check_unique();
  const size_t ctx_base = st.ctx.size();
  size_t i = begin;
  while (i < end) {
    const uint32_t d = trie.depth(i);
    const std::vector<Top>& prev = level[d - 1];
    std::vector<Top>& cur = level[d];
    if (keep_ctx) {
      st.ctx.resize(ctx_base + (d - 1 - base_depth));
      st.ctx.push_back(static_cast<char>(trie.byte(i)));
    }
    if (prev.size() == 1) {  // fast path: one stack moving inside its rule
      const uint32_t t = g.step(prev[0].state, trie.byte(i));
      if (t == kNoState) {
        i = trie.next(i);
        continue;
      }
      const DfaState& ts = g.state(t);
      if (ts.calls_begin == ts.calls_end && !ts.accepting && ts.edges_begin != ts.edges_end) {
        cur.resize(1);
        cur[0] = {t, prev[0].below};
        mark[d] = mark[d - 1];
        on_node(i, d - base_depth, true, uint8_t{0});
        ++i;
        continue;
      }
    }
    st.frames.resize(mark[d - 1]);
    uint8_t flags = 0;
    st.advance(prev, trie.byte(i), cur, flags);
    const bool alive = !cur.empty();
    if (alive || flags) on_node(i, d - base_depth, alive, flags);
    if (alive) {
      mark[d] = st.frames.size();
      ++i;
    } else {
      i = trie.next(i);
    }
  }
  st.frames.resize(base);
  if (keep_ctx) st.ctx.resize(ctx_base);
}

}  // namespace memra::grammar

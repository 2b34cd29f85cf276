#include "grammar/stacks.h"

#include <algorithm>

#include "grammar/unique_items.h"

namespace memra::grammar {

bool Stacks::seen(Top t) {
  if (std::find(visited_.begin(), visited_.end(), t) != visited_.end()) return true;
  visited_.push_back(t);
  return false;
}

void Stacks::expand_rec(Top t, std::vector<Top>& out, uint8_t& flags, uint32_t guard) {
  // Every expansion is either a push (bounded by max_depth_) or a pop (bounded by the stack
  // depth); `seen` cuts the loops that nullable repetitions (x* with x nullable) would make.
  if (guard > 2 * max_depth_ + 64 || out.size() >= kMaxStacks || seen(t)) return;
  const DfaState& st = g_.state(t.state);
  if (st.edges_begin != st.edges_end) out.push_back(t);
  if (st.calls_begin != st.calls_end) {
    const uint32_t depth = t.below >= kEscape ? 0 : frames[t.below].depth;
    for (const CallEdge* c = g_.calls_begin(t.state); c != g_.calls_end(t.state); ++c) {
      const uint32_t start = g_.rule_start(c->rule);
      if (g_.is_final_only(c->target)) {
        expand_rec({start, t.below}, out, flags, guard + 1);  // tail call: nothing to return to
        continue;
      }
      if (depth + 1 > max_depth_) continue;
      frames.push_back({c->target, t.below, depth + 1});
      expand_rec({start, static_cast<uint32_t>(frames.size() - 1)}, out, flags, guard + 1);
    }
  }
  if (st.accepting) {
    if (t.below == kBottom) flags |= kReachedBottom;
    else if (t.below == kEscape) flags |= kReachedEscape;
    else {
      const Frame f = frames[t.below];
      // Returning into a uniqueItems array: an item (a string) just completed.
      if (check_unique_ && g_.rule_unique(g_.state(f.state).rule) && !string_item_is_new(ctx)) return;
      expand_rec({f.state, f.below}, out, flags, guard + 1);
    }
  }
}

void Stacks::expand(Top t, std::vector<Top>& out, uint8_t& flags) {
  visited_.clear();
  for (const Top& x : out) visited_.push_back(x);
  expand_rec(t, out, flags, 0);
}

bool Stacks::advance(const std::vector<Top>& in, uint8_t b, std::vector<Top>& out, uint8_t& flags) {
  out.clear();
  flags = 0;
  if (in.size() == 1) {  // fast path: one stack moving inside its rule
    const uint32_t t = g_.step(in[0].state, b);
    if (t == kNoState) return false;
    const DfaState& st = g_.state(t);
    if (st.calls_begin == st.calls_end && !st.accepting) {
      if (st.edges_begin != st.edges_end) out.push_back({t, in[0].below});
      return !out.empty();
    }
  }
  visited_.clear();
  for (const Top& x : in) {
    const uint32_t t = g_.step(x.state, b);
    if (t != kNoState) expand_rec({t, x.below}, out, flags, 0);
  }
  return !out.empty() || flags != 0;
}

}  // namespace memra::grammar

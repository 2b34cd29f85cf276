// Grammar -> CompiledGrammar (compiled_grammar.h): inlining, one DFA per remaining rule, pruning
// of states that can never complete, the left-recursion check and the structural state keys.
#include <algorithm>
#include <atomic>
#include <map>
#include <unordered_map>

#include "grammar/compiled_grammar.h"

namespace memra::grammar {

namespace {

// A rule body of at most this cost (about one NFA state per unit) is inlined into its callers.
constexpr int64_t kInlineCost = 96;
// States with more byte edges than this get a 256-entry table.
constexpr uint32_t kDenseEdges = 6;
constexpr int kMaxBuildDepth = 20000;
// TokenVocab::kShortTokenBytes (the grammar's compile does not need the vocabulary itself).
constexpr uint32_t TokenVocabShortBytes = 16;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdull;
}

struct NfaState {
  std::vector<uint32_t> eps;
  std::vector<std::pair<ByteSet, uint32_t>> bytes;
  std::vector<std::pair<uint32_t, uint32_t>> calls;  // (original rule id, target)
};

struct VecHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = v.size();
    for (uint32_t x : v) h = mix(h, x);
    return static_cast<size_t>(h);
  }
};

}  // namespace

class Compiler {
 public:
  explicit Compiler(const Grammar& g) : g_(g), lim_(g.limits()) {}

  std::shared_ptr<const CompiledGrammar> run() {
    if (g_.root() < 0) grammar_fail("the grammar has no root rule");
    out_ = std::make_shared<CompiledGrammar>();
    find_reachable();
    find_recursive();
    decide_inlining();
    for (int32_t r : compiled_order_) build_rule(r);
    check_left_recursion();  // first: a left-recursive rule is often also one that never completes
    prune_dead();
    compute_keys();
    make_dense_tables();
    return out_;
  }

 private:
  const Grammar& g_;
  const Limits& lim_;
  std::shared_ptr<CompiledGrammar> out_;
  std::vector<std::vector<int32_t>> refs_;  // per original rule: rules its body references
  std::vector<char> reachable_, recursive_, inlined_;
  std::vector<int64_t> cost_;
  std::vector<int32_t> topo_;               // reachable rules, callees before callers (Tarjan order)
  std::vector<int32_t> compiled_order_;     // original ids of the compiled rules
  std::vector<int32_t> compiled_index_;     // original id -> compiled index (-1)
  int64_t nfa_total_ = 0;

  // ---- rule graph ----
  void collect_refs(int32_t body, std::vector<int32_t>& out) const {
    std::vector<int32_t> stack{body};
    while (!stack.empty()) {
      const Expr& e = g_.expr(stack.back());
      stack.pop_back();
      if (e.kind == ExprKind::Ref) out.push_back(e.rule);
      for (int32_t k : e.kids) stack.push_back(k);
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }

  void find_reachable() {
    const size_t n = g_.n_rules();
    refs_.assign(n, {});
    reachable_.assign(n, 0);
    std::vector<int32_t> work{g_.root()};
    reachable_[static_cast<size_t>(g_.root())] = 1;
    while (!work.empty()) {
      const int32_t r = work.back();
      work.pop_back();
      if (g_.rule_body(r) < 0) grammar_fail("rule '{}' is used but never defined", g_.rule_name(r));
      collect_refs(g_.rule_body(r), refs_[static_cast<size_t>(r)]);
      for (int32_t s : refs_[static_cast<size_t>(r)])
        if (!reachable_[static_cast<size_t>(s)]) {
          reachable_[static_cast<size_t>(s)] = 1;
          work.push_back(s);
        }
    }
  }

  // Iterative Tarjan: recursive_[r] when r is in a cycle; topo_ lists SCCs callees first.
  void find_recursive() {
    const size_t n = g_.n_rules();
    recursive_.assign(n, 0);
    std::vector<int32_t> index(n, -1), low(n, 0);
    std::vector<char> on_stack(n, 0);
    std::vector<int32_t> stack;
    int32_t counter = 0;
    struct Frame {
      int32_t r;
      size_t next;
    };
    for (size_t root = 0; root < n; ++root) {
      if (!reachable_[root] || index[root] >= 0) continue;
      std::vector<Frame> call{{static_cast<int32_t>(root), 0}};
      index[root] = low[root] = counter++;
      stack.push_back(static_cast<int32_t>(root));
      on_stack[root] = 1;
      while (!call.empty()) {
        Frame& f = call.back();
        const auto& kids = refs_[static_cast<size_t>(f.r)];
        if (f.next < kids.size()) {
          const int32_t s = kids[f.next++];
          const auto su = static_cast<size_t>(s);
          if (index[su] < 0) {
            index[su] = low[su] = counter++;
            stack.push_back(s);
            on_stack[su] = 1;
            call.push_back({s, 0});
          } else if (on_stack[su]) {
            low[static_cast<size_t>(f.r)] = std::min(low[static_cast<size_t>(f.r)], index[su]);
          }
          continue;
        }
        const int32_t r = f.r;
        const auto ru = static_cast<size_t>(r);
        call.pop_back();
        if (!call.empty()) {
          const auto pu = static_cast<size_t>(call.back().r);
          low[pu] = std::min(low[pu], low[ru]);
        }
        if (low[ru] == index[ru]) {
          std::vector<int32_t> scc;
          for (;;) {
            const int32_t x = stack.back();
            stack.pop_back();
            on_stack[static_cast<size_t>(x)] = 0;
            scc.push_back(x);
            if (x == r) break;
          }
          const bool self = std::binary_search(refs_[ru].begin(), refs_[ru].end(), r);
          for (int32_t x : scc) {
            if (scc.size() > 1 || self) recursive_[static_cast<size_t>(x)] = 1;
            topo_.push_back(x);
          }
        }
      }
    }
  }

  int64_t expr_cost(int32_t e, int depth) const {
    if (depth > lim_.max_nesting * 4 + 64) grammar_fail("the grammar nests expressions too deeply");
    const Expr& x = g_.expr(e);
    switch (x.kind) {
      case ExprKind::Empty: return 0;
      case ExprKind::Bytes: return 1;
      case ExprKind::Ref: {
        const auto r = static_cast<size_t>(x.rule);
        return inlined_[r] ? cost_[r] : 1;
      }
      case ExprKind::Repeat: {
        const int64_t copies = x.max < 0 ? std::max(x.min, 1) : x.max;
        return std::min<int64_t>(expr_cost(x.kids[0], depth + 1) * copies + 1, int64_t{1} << 40);
      }
      default: {
        int64_t c = 1;
        for (int32_t k : x.kids) c = std::min<int64_t>(c + expr_cost(k, depth + 1), int64_t{1} << 40);
        return c;
      }
    }
  }

  void decide_inlining() {
    const size_t n = g_.n_rules();
    inlined_.assign(n, 0);
    cost_.assign(n, 0);
    compiled_index_.assign(n, -1);
    for (int32_t r : topo_) {  // callees first: their costs are known
      const auto ru = static_cast<size_t>(r);
      cost_[ru] = expr_cost(g_.rule_body(r), 0);
      inlined_[ru] = !recursive_[ru] && !g_.rule_keep(r) && !g_.rule_unique(r) && r != g_.root() && cost_[ru] <= kInlineCost;
    }
    // Compiled rules: the root first, then every reachable rule that is not inlined.
    compiled_order_.push_back(g_.root());
    for (size_t r = 0; r < n; ++r)
      if (reachable_[r] && !inlined_[r] && static_cast<int32_t>(r) != g_.root())
        compiled_order_.push_back(static_cast<int32_t>(r));
    for (size_t i = 0; i < compiled_order_.size(); ++i)
      compiled_index_[static_cast<size_t>(compiled_order_[i])] = static_cast<int32_t>(i);
    out_->rule_start_.assign(compiled_order_.size(), 0);
    for (int32_t r : compiled_order_) out_->rule_names_.push_back(g_.rule_name(r));
    for (size_t i = 0; i < compiled_order_.size(); ++i) {
      if (!g_.rule_unique(compiled_order_[i])) continue;
      out_->rule_unique_.resize(compiled_order_.size(), 0);
      out_->rule_unique_[i] = 1;
    }
    out_->root_rule_ = 0;
  }

  // ---- NFA ----
  std::vector<NfaState> nfa_;

  uint32_t new_nfa_state() {
    if (++nfa_total_ > lim_.max_nfa_states)
      grammar_fail("the grammar is too large: more than {} automaton states before determinization",
                   lim_.max_nfa_states);
    nfa_.emplace_back();
    return static_cast<uint32_t>(nfa_.size() - 1);
  }

  uint32_t build(int32_t e, uint32_t from, int depth) {
    if (depth > kMaxBuildDepth) grammar_fail("the grammar nests too deeply (inlined rules within rules)");
    const Expr& x = g_.expr(e);
    switch (x.kind) {
      case ExprKind::Empty: return from;
      case ExprKind::Bytes: {
        const uint32_t t = new_nfa_state();
        nfa_[from].bytes.emplace_back(x.bytes, t);
        return t;
      }
      case ExprKind::Seq: {
        uint32_t cur = from;
        for (int32_t k : x.kids) cur = build(k, cur, depth + 1);
        return cur;
      }
      case ExprKind::Alt: {
        const uint32_t end = new_nfa_state();
        for (int32_t k : x.kids) {
          const uint32_t s = new_nfa_state();
          nfa_[from].eps.push_back(s);
          const uint32_t t = build(k, s, depth + 1);
          nfa_[t].eps.push_back(end);
        }
        return end;
      }
      case ExprKind::Repeat: {
        uint32_t cur = from;
        for (int32_t i = 0; i < x.min; ++i) cur = build(x.kids[0], cur, depth + 1);
        if (x.max < 0) {
          const uint32_t loop = new_nfa_state();
          nfa_[cur].eps.push_back(loop);
          const uint32_t t = build(x.kids[0], loop, depth + 1);
          nfa_[t].eps.push_back(loop);
          return loop;
        }
        const uint32_t end = new_nfa_state();
        nfa_[cur].eps.push_back(end);
        for (int32_t i = x.min; i < x.max; ++i) {
          cur = build(x.kids[0], cur, depth + 1);
          nfa_[cur].eps.push_back(end);
        }
        return end;
      }
      case ExprKind::Ref: {
        const auto r = static_cast<size_t>(x.rule);
        if (inlined_[r]) return build(g_.rule_body(x.rule), from, depth + 1);
        const uint32_t t = new_nfa_state();
        nfa_[from].calls.emplace_back(static_cast<uint32_t>(compiled_index_[r]), t);
        return t;
      }
    }
    return from;
  }

  void closure(std::vector<uint32_t>& set, std::vector<uint32_t>& mark, uint32_t stamp) const {
    std::vector<uint32_t> work(set.begin(), set.end());
    for (uint32_t s : set) mark[s] = stamp;
    while (!work.empty()) {
      const uint32_t s = work.back();
      work.pop_back();
      for (uint32_t t : nfa_[s].eps)
        if (mark[t] != stamp) {
          mark[t] = stamp;
          set.push_back(t);
          work.push_back(t);
        }
    }
    std::sort(set.begin(), set.end());
  }

  void build_rule(int32_t r) {
    // The cost estimate counts the states the construction would make: refuse before allocating.
    if (nfa_total_ + cost_[static_cast<size_t>(r)] > lim_.max_nfa_states)
      grammar_fail("the grammar is too large: rule '{}' expands to about {} automaton states (limit {})",
                   g_.rule_name(r), cost_[static_cast<size_t>(r)], lim_.max_nfa_states);
    nfa_.clear();
    const uint32_t start = new_nfa_state();
    const uint32_t end = build(g_.rule_body(r), start, 0);
    const uint32_t rule_index = static_cast<uint32_t>(compiled_index_[static_cast<size_t>(r)]);

    std::vector<uint32_t> mark(nfa_.size(), 0);
    uint32_t stamp = 0;
    std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> ids;
    std::vector<std::vector<uint32_t>> sets;
    const uint32_t base = static_cast<uint32_t>(out_->states_.size());
    auto intern = [&](std::vector<uint32_t> set) -> uint32_t {
      closure(set, mark, ++stamp);
      auto it = ids.find(set);
      if (it != ids.end()) return it->second;
      if (static_cast<int64_t>(sets.size()) >= lim_.max_dfa_states_per_rule)
        grammar_fail("rule '{}' needs more than {} automaton states (a pattern or repetition that is too complex)",
                     g_.rule_name(r), lim_.max_dfa_states_per_rule);
      if (static_cast<int64_t>(out_->states_.size()) >= lim_.max_dfa_states)
        grammar_fail("the grammar needs more than {} automaton states", lim_.max_dfa_states);
      const uint32_t id = base + static_cast<uint32_t>(sets.size());
      ids.emplace(set, id);
      sets.push_back(std::move(set));
      DfaState st;
      st.rule = rule_index;
      out_->states_.push_back(st);
      return id;
    };
    out_->rule_start_[rule_index] = intern({start});

    std::vector<uint32_t> raw, prev_raw;
    for (size_t i = 0; i < sets.size(); ++i) {
      const std::vector<uint32_t> set = sets[i];  // copy: `sets` grows below
      const uint32_t id = base + static_cast<uint32_t>(i);
      ByteSet all;
      std::vector<std::pair<uint32_t, uint32_t>> calls;
      bool accepting = false;
      for (uint32_t s : set) {
        if (s == end) accepting = true;
        for (auto& [bs, t] : nfa_[s].bytes) all = all | bs;
        for (auto& c : nfa_[s].calls) calls.push_back(c);
      }
      std::vector<ByteEdge> edges;
      prev_raw.clear();
      int prev_b = -2;
      for (int b = 0; b < 256; ++b) {
        if (!all.test(static_cast<uint8_t>(b))) continue;
        raw.clear();
        for (uint32_t s : set)
          for (auto& [bs, t] : nfa_[s].bytes)
            if (bs.test(static_cast<uint8_t>(b))) raw.push_back(t);
        std::sort(raw.begin(), raw.end());
        raw.erase(std::unique(raw.begin(), raw.end()), raw.end());
        if (prev_b == b - 1 && raw == prev_raw) {
          edges.back().hi = static_cast<uint8_t>(b);
        } else {
          const uint32_t t = intern(raw);
          edges.push_back({static_cast<uint8_t>(b), static_cast<uint8_t>(b), t});
          prev_raw = raw;
        }
        prev_b = b;
      }
      std::sort(calls.begin(), calls.end());
      std::vector<CallEdge> call_edges;
      for (size_t c = 0; c < calls.size();) {
        size_t d = c;
        std::vector<uint32_t> targets;
        while (d < calls.size() && calls[d].first == calls[c].first) targets.push_back(calls[d++].second);
        call_edges.push_back({calls[c].first, intern(std::move(targets))});
        c = d;
      }
      DfaState& st = out_->states_[id];
      st.accepting = accepting;
      st.edges_begin = static_cast<uint32_t>(out_->edges_.size());
      out_->edges_.insert(out_->edges_.end(), edges.begin(), edges.end());
      st.edges_end = static_cast<uint32_t>(out_->edges_.size());
      st.calls_begin = static_cast<uint32_t>(out_->calls_.size());
      out_->calls_.insert(out_->calls_.end(), call_edges.begin(), call_edges.end());
      st.calls_end = static_cast<uint32_t>(out_->calls_.size());
    }
  }

  // ---- pruning: states that can never finish their rule lose the edges into them ----
  void prune_dead() {
    auto& S = out_->states_;
    const size_t n = S.size();
    std::vector<char> live(n, 0), productive(out_->rule_start_.size(), 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t s = n; s-- > 0;) {
        if (live[s]) continue;
        bool l = S[s].accepting;
        for (uint32_t i = S[s].edges_begin; !l && i < S[s].edges_end; ++i) l = live[out_->edges_[i].target];
        for (uint32_t i = S[s].calls_begin; !l && i < S[s].calls_end; ++i)
          l = productive[out_->calls_[i].rule] && live[out_->calls_[i].target];
        if (l) {
          live[s] = 1;
          changed = true;
          if (out_->rule_start_[S[s].rule] == s) productive[S[s].rule] = 1;
        }
      }
    }
    if (!productive[0])
      grammar_fail("the grammar matches no string at all (rule '{}' can never be completed)", out_->rule_names_[0]);
    std::vector<ByteEdge> edges;
    std::vector<CallEdge> calls;
    for (size_t s = 0; s < n; ++s) {
      DfaState& st = S[s];
      const uint32_t eb = static_cast<uint32_t>(edges.size()), cb = static_cast<uint32_t>(calls.size());
      if (live[s]) {
        for (uint32_t i = st.edges_begin; i < st.edges_end; ++i)
          if (live[out_->edges_[i].target]) edges.push_back(out_->edges_[i]);
        for (uint32_t i = st.calls_begin; i < st.calls_end; ++i)
          if (productive[out_->calls_[i].rule] && live[out_->calls_[i].target]) calls.push_back(out_->calls_[i]);
      }
      st.edges_begin = eb;
      st.edges_end = static_cast<uint32_t>(edges.size());
      st.calls_begin = cb;
      st.calls_end = static_cast<uint32_t>(calls.size());
    }
    out_->edges_ = std::move(edges);
    out_->calls_ = std::move(calls);
  }

  // ---- left recursion: a rule that can call itself before matching a byte ----
  void check_left_recursion() {
    const auto& S = out_->states_;
    const size_t nr = out_->rule_start_.size();
    std::vector<char> nullable(nr, 0);
    // States reachable from a rule's start through calls of nullable rules only.
    auto zero_width = [&](uint32_t rule, auto&& on_state) {
      std::vector<uint32_t> work{out_->rule_start_[rule]};
      std::vector<uint32_t> seen{out_->rule_start_[rule]};
      while (!work.empty()) {
        const uint32_t s = work.back();
        work.pop_back();
        on_state(s);
        for (uint32_t i = S[s].calls_begin; i < S[s].calls_end; ++i) {
          const CallEdge& c = out_->calls_[i];
          if (nullable[c.rule] && std::find(seen.begin(), seen.end(), c.target) == seen.end()) {
            seen.push_back(c.target);
            work.push_back(c.target);
          }
        }
      }
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (uint32_t r = 0; r < nr; ++r) {
        if (nullable[r]) continue;
        bool acc = false;
        zero_width(r, [&](uint32_t s) { acc = acc || S[s].accepting; });
        if (acc) nullable[r] = 1, changed = true;
      }
    }
    std::vector<std::vector<uint32_t>> left(nr);
    for (uint32_t r = 0; r < nr; ++r)
      zero_width(r, [&](uint32_t s) {
        for (uint32_t i = S[s].calls_begin; i < S[s].calls_end; ++i) left[r].push_back(out_->calls_[i].rule);
      });
    // Cycle search (colours: 0 new, 1 on the path, 2 done).
    std::vector<uint8_t> colour(nr, 0);
    for (uint32_t r0 = 0; r0 < nr; ++r0) {
      if (colour[r0]) continue;
      std::vector<std::pair<uint32_t, size_t>> path{{r0, 0}};
      colour[r0] = 1;
      while (!path.empty()) {
        auto& [r, next] = path.back();
        if (next < left[r].size()) {
          const uint32_t s = left[r][next++];
          if (colour[s] == 1)
            grammar_fail("rule '{}' is left-recursive (it can reach itself before matching any text); rewrite it "
                         "with repetition, e.g. x ::= y (op y)*",
                         out_->rule_names_[s]);
          if (colour[s] == 0) {
            colour[s] = 1;
            path.push_back({s, 0});
          }
          continue;
        }
        colour[r] = 2;
        path.pop_back();
      }
    }
  }

  // ---- structural keys ----
  void compute_keys() {
    const auto& S = out_->states_;
    const size_t nr = out_->rule_start_.size();
    std::vector<uint32_t> first(nr, 0), count(nr, 0);
    for (uint32_t r = 0; r < nr; ++r) first[r] = out_->rule_start_[r];
    for (const DfaState& st : S) ++count[st.rule];
    std::vector<uint64_t> shape(nr, 0), own(nr, 0);
    for (uint32_t r = 0; r < nr; ++r) {
      // The uniqueness check changes what a walk through the rule accepts: part of its key.
      uint64_t h = mix(0x5151, count[r] + (out_->rule_unique(r) ? (uint64_t{1} << 40) : 0));
      for (uint32_t s = first[r]; s < first[r] + count[r]; ++s) {
        const DfaState& st = S[s];
        h = mix(h, st.accepting);
        for (uint32_t i = st.edges_begin; i < st.edges_end; ++i) {
          const ByteEdge& e = out_->edges_[i];
          h = mix(h, (uint64_t{e.lo} << 40) | (uint64_t{e.hi} << 32) | (e.target - first[r]));
        }
        h = mix(h, 0xCA11);
        for (uint32_t i = st.calls_begin; i < st.calls_end; ++i) h = mix(h, out_->calls_[i].target - first[r]);
      }
      shape[r] = h;
    }
    for (uint32_t r = 0; r < nr; ++r) {
      uint64_t h = shape[r];
      for (uint32_t s = first[r]; s < first[r] + count[r]; ++s)
        for (uint32_t i = S[s].calls_begin; i < S[s].calls_end; ++i) h = mix(h, shape[out_->calls_[i].rule]);
      own[r] = h;
    }
    // A rule's key covers every rule it can reach (the walk from its states may enter them).
    std::vector<uint64_t> key(nr, 0);
    std::vector<uint32_t> mark(nr, 0);
    uint32_t stamp = 0;
    const bool share = nr <= 4096;  // bounded work; otherwise keys are private to this grammar
    static std::atomic<uint64_t> private_counter{1};
    const uint64_t private_salt = share ? 0 : private_counter.fetch_add(1);
    for (uint32_t r = 0; r < nr; ++r) {
      std::vector<uint64_t> reach;
      if (share) {
        ++stamp;
        std::vector<uint32_t> work{r};
        mark[r] = stamp;
        while (!work.empty()) {
          const uint32_t x = work.back();
          work.pop_back();
          reach.push_back(own[x]);
          for (uint32_t s = first[x]; s < first[x] + count[x]; ++s)
            for (uint32_t i = S[s].calls_begin; i < S[s].calls_end; ++i) {
              const uint32_t c = out_->calls_[i].rule;
              if (mark[c] != stamp) {
                mark[c] = stamp;
                work.push_back(c);
              }
            }
        }
        std::sort(reach.begin(), reach.end());
      }
      uint64_t h = mix(own[r], private_salt);
      for (uint64_t x : reach) h = mix(h, x);
      key[r] = h;
    }
    out_->state_key_.resize(S.size());
    for (uint32_t s = 0; s < S.size(); ++s) out_->state_key_[s] = mix(key[S[s].rule], s - first[S[s].rule]);
    compute_short_keys();
  }

  // Hash of what a state does within the next kShortTokenBytes bytes (rounds of refinement over
  // the byte edges). A state with calls keeps its full key: what a callee does is not unrolled.
  void compute_short_keys() {
    const auto& S = out_->states_;
    const size_t n = S.size();
    auto has_calls = [&](uint32_t s) { return S[s].calls_begin != S[s].calls_end; };
    std::vector<uint64_t> h(n), next(n);
    for (uint32_t s = 0; s < n; ++s) h[s] = has_calls(s) ? out_->state_key_[s] : mix(0x5407, S[s].accepting);
    for (uint32_t round = 0; round < TokenVocabShortBytes; ++round) {
      for (uint32_t s = 0; s < n; ++s) {
        if (has_calls(s)) {
          next[s] = h[s];
          continue;
        }
        uint64_t x = mix(0x5408, S[s].accepting);
        for (uint32_t i = S[s].edges_begin; i < S[s].edges_end; ++i) {
          const ByteEdge& e = out_->edges_[i];
          x = mix(mix(x, (uint64_t{e.lo} << 8) | e.hi), h[e.target]);
        }
        next[s] = x;
      }
      std::swap(h, next);
    }
    out_->short_key_ = std::move(h);
  }

  void make_dense_tables() {
    for (DfaState& st : out_->states_) {
      if (st.edges_end - st.edges_begin <= kDenseEdges) continue;
      st.dense = static_cast<int32_t>(out_->dense_.size() / 256);
      out_->dense_.resize(out_->dense_.size() + 256, kNoState);
      uint32_t* t = out_->dense_.data() + static_cast<size_t>(st.dense) * 256;
      for (uint32_t i = st.edges_begin; i < st.edges_end; ++i)
        for (int b = out_->edges_[i].lo; b <= out_->edges_[i].hi; ++b) t[b] = out_->edges_[i].target;
    }
  }
};

std::shared_ptr<const CompiledGrammar> CompiledGrammar::compile(const Grammar& g) { return Compiler(g).run(); }

size_t CompiledGrammar::memory_bytes() const {
  return states_.size() * sizeof(DfaState) + edges_.size() * sizeof(ByteEdge) + calls_.size() * sizeof(CallEdge) +
         dense_.size() * 4 + state_key_.size() * 8;
}

}  // namespace memra::grammar

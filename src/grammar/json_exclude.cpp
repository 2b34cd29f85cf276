#include "grammar/json_exclude.h"

#include <algorithm>
#include <map>
#include <memory>

#include "grammar/json_numbers.h"
#include "grammar/text_parse.h"

namespace memra::grammar {

namespace {

// One recursion level of Builder::build per code point of an excluded string: bounded well below
// what a thread's stack holds (frames are ~30 KiB under AddressSanitizer, 8 MiB stacks).
constexpr int kMaxExcludedLength = 128;

// The excluded values as a trie over code points.
struct Node {
  bool terminal = false;
  std::map<uint32_t, std::unique_ptr<Node>> kids;
};

class Builder {
 public:
  Builder(Grammar& g, int64_t lo, int64_t hi) : g_(g), lo_(lo), hi_(hi) {}

  // Content from `n` on, `d` code points already written: stop here (when `n` is not an
  // excluded value and the length fits), follow a child, or leave the trie with any other
  // character (then any characters up to the length bounds).
  int32_t build(const Node& n, int64_t d, int depth) {
    if (depth > kMaxExcludedLength)
      grammar_fail("json_schema: an excluded string ('not') is longer than {} characters", kMaxExcludedLength);
    std::vector<int32_t> alts;
    if (!n.terminal && d >= lo_ && (hi_ < 0 || d <= hi_)) alts.push_back(g_.empty());
    if (hi_ < 0 || d + 1 <= hi_) {
      CodepointSet others;
      others.add(0, 0x10FFFF);
      CodepointSet kids;
      for (const auto& [cp, kid] : n.kids) {
        CodepointSet one;
        one.add(cp, cp);
        alts.push_back(g_.seq({json_string_chars(g_, one), build(*kid, d + 1, depth + 1)}));
        kids.add(cp, cp);
      }
      kids.normalize();
      others = kids.ranges.empty() ? others : kids.complement();
      if (!others.ranges.empty()) {
        CodepointSet any;
        any.add(0, 0x10FFFF);
        const int64_t rest_lo = std::max<int64_t>(0, lo_ - d - 1);
        const int64_t rest_hi = hi_ < 0 ? -1 : hi_ - d - 1;
        alts.push_back(g_.seq({json_string_chars(g_, others),
                               g_.repeat(json_string_chars(g_, any), static_cast<int32_t>(rest_lo), static_cast<int32_t>(rest_hi))}));
      }
    }
    if (alts.empty()) return -1;
    return g_.alt(std::move(alts));
  }

 private:
  Grammar& g_;
  const int64_t lo_, hi_;
};

}  // namespace

int32_t string_content_excluding(Grammar& g, const std::vector<std::string>& excluded, int64_t min_len, int64_t max_len) {
  // Each excluded character costs a few dozen expression nodes: refuse early what could not fit
  // (before building the trie, whose memory would come first).
  size_t chars = 0;
  for (const std::string& s : excluded) chars += s.size();
  if (static_cast<int64_t>(chars) * 16 > g.limits().max_exprs)
    grammar_fail("json_schema: the grammar is too large: 'not' excludes {} bytes of strings", chars);
  Node root;
  for (const std::string& s : excluded) {
    Node* n = &root;
    for (size_t pos = 0; pos < s.size();) {
      const uint32_t cp = next_codepoint(s, pos, "json_schema: an excluded string ('not')");
      auto& kid = n->kids[cp];
      if (!kid) kid = std::make_unique<Node>();
      n = kid.get();
    }
    n->terminal = true;
  }
  Builder b(g, min_len, max_len);
  const int32_t e = b.build(root, 0, 0);
  if (e < 0) grammar_fail("json_schema: 'not' excludes every string the schema allows");
  return e;
}

int32_t integer_range_excluding(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi,
                                std::vector<int64_t> excluded) {
  std::sort(excluded.begin(), excluded.end());
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  std::vector<int32_t> alts;
  std::optional<int64_t> from = lo;  // the next gap starts here
  for (int64_t x : excluded) {
    if ((lo && x < *lo) || (hi && x > *hi)) continue;
    if (!from || *from <= x - 1) alts.push_back(integer_range_expr(g, from, x - 1));
    from = x + 1;
  }
  if (!from || !hi || *from <= *hi) alts.push_back(integer_range_expr(g, from, hi));
  if (alts.empty()) grammar_fail("json_schema: 'not' excludes every integer the schema allows");
  return g.alt(std::move(alts));
}

}  // namespace memra::grammar

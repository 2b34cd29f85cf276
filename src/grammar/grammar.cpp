#include "grammar/grammar.h"

#include <algorithm>

namespace memra::grammar {

namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

int encoded_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out, int n) {
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(lead[n] | cp);
}

// Appends to `out` byte-range sequences (one per element) whose UTF-8 strings are exactly the
// encodings of [lo, hi]; lo and hi encode to the same length. A range is split until every
// continuation byte below the first differing one spans its whole 0x80..0xBF range.
void split_range(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  const int n = encoded_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_range(lo, lo | m, out);
        split_range((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_range(lo, (hi & ~m) - 1, out);
        split_range(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a, n);
  encode(hi, b, n);
  std::vector<std::pair<uint8_t, uint8_t>> seq;
  for (int i = 0; i < n; ++i) seq.emplace_back(a[i], b[i]);
  out.push_back(std::move(seq));
}

}  // namespace

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) std::swap(lo, hi);
  ranges.emplace_back(lo, std::min(hi, kMaxCodepoint));
}

void CodepointSet::normalize() {
  std::sort(ranges.begin(), ranges.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (auto [lo, hi] : ranges) {
    if (lo > kMaxCodepoint) continue;
    if (!merged.empty() && lo <= merged.back().second + 1) merged.back().second = std::max(merged.back().second, hi);
    else merged.emplace_back(lo, hi);
  }
  // Surrogates are not scalar values: they have no UTF-8 encoding.
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (auto [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) out.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
  }
  ranges = std::move(out);
}

CodepointSet CodepointSet::complement() const {
  CodepointSet s = *this;
  s.normalize();
  CodepointSet out;
  uint32_t next = 0;
  for (auto [lo, hi] : s.ranges) {
    if (lo > next) out.ranges.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodepoint) out.ranges.emplace_back(next, kMaxCodepoint);
  out.normalize();
  return out;
}

int32_t Grammar::push(Expr e) {
  if (static_cast<int64_t>(exprs_.size()) >= limits_.max_exprs)
    grammar_fail("the grammar is too large: more than {} expression nodes", limits_.max_exprs);
  exprs_.push_back(std::move(e));
  return static_cast<int32_t>(exprs_.size() - 1);
}

int32_t Grammar::empty() { return push(Expr{}); }

int32_t Grammar::bytes(const ByteSet& set) {
  Expr e;
  e.kind = ExprKind::Bytes;
  e.bytes = set;
  return push(std::move(e));
}

int32_t Grammar::byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.set_range(lo, hi);
  return bytes(s);
}

int32_t Grammar::literal(std::string_view text) {
  if (text.empty()) return empty();
  if (text.size() == 1) return byte_range(static_cast<uint8_t>(text[0]), static_cast<uint8_t>(text[0]));
  std::vector<int32_t> kids;
  kids.reserve(text.size());
  for (char c : text) kids.push_back(byte_range(static_cast<uint8_t>(c), static_cast<uint8_t>(c)));
  return seq(std::move(kids));
}

int32_t Grammar::seq(std::vector<int32_t> kids) {
  if (kids.size() == 1) return kids[0];
  Expr e;
  e.kind = kids.empty() ? ExprKind::Empty : ExprKind::Seq;
  e.kids = std::move(kids);
  return push(std::move(e));
}

int32_t Grammar::alt(std::vector<int32_t> kids) {
  if (kids.size() == 1) return kids[0];
  Expr e;
  e.kind = ExprKind::Alt;  // no alternatives: matches nothing
  e.kids = std::move(kids);
  return push(std::move(e));
}

int32_t Grammar::repeat(int32_t kid, int32_t min, int32_t max) {
  if (min < 0 || (max >= 0 && max < min))
    grammar_fail("invalid repetition bounds {{{},{}}}", min, max);
  if (min > limits_.max_repeat || max > limits_.max_repeat)
    grammar_fail("a repetition bound of {} is larger than the limit of {}", std::max(min, max), limits_.max_repeat);
  if (min == 1 && max == 1) return kid;
  Expr e;
  e.kind = ExprKind::Repeat;
  e.kids = {kid};
  e.min = min;
  e.max = max;
  return push(std::move(e));
}

int32_t Grammar::ref(int32_t rule) {
  MEMRA_ASSERT(rule >= 0 && static_cast<size_t>(rule) < rules_.size(), "ref to unknown rule {}", rule);
  Expr e;
  e.kind = ExprKind::Ref;
  e.rule = rule;
  return push(std::move(e));
}

int32_t Grammar::codepoints(const CodepointSet& set_in) {
  CodepointSet set = set_in;
  set.normalize();
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> seqs;
  for (auto [lo, hi] : set.ranges) {
    // Cut at the boundaries of the encoded lengths first.
    for (uint32_t bound : {0x7Fu, 0x7FFu, 0xFFFFu, kMaxCodepoint}) {
      if (lo > hi) break;
      if (lo > bound) continue;
      const uint32_t end = std::min(hi, bound);
      split_range(lo, end, seqs);
      lo = end + 1;
    }
  }
  // Single bytes share one alternative.
  ByteSet ascii;
  std::vector<int32_t> alts;
  for (auto& s : seqs) {
    if (s.size() == 1) {
      ascii.set_range(s[0].first, s[0].second);
      continue;
    }
    std::vector<int32_t> parts;
    for (auto [a, b] : s) parts.push_back(byte_range(a, b));
    alts.push_back(seq(std::move(parts)));
  }
  if (!ascii.empty()) alts.insert(alts.begin(), bytes(ascii));
  return alt(std::move(alts));
}

int32_t Grammar::clone(int32_t e) {
  Expr copy = exprs_[static_cast<size_t>(e)];
  for (int32_t& k : copy.kids) k = clone(k);
  return push(std::move(copy));
}

int32_t Grammar::add_rule(std::string name, bool keep) {
  if (static_cast<int64_t>(rules_.size()) >= limits_.max_rules)
    grammar_fail("the grammar has more than {} rules", limits_.max_rules);
  rules_.push_back(Rule{std::move(name), -1, keep});
  return static_cast<int32_t>(rules_.size() - 1);
}

int32_t Grammar::find_rule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

void Grammar::define(int32_t rule, int32_t body) { rules_[static_cast<size_t>(rule)].body = body; }

}  // namespace memra::grammar

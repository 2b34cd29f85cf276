#include "grammar/json_numbers.h"

#include <string>

#include "grammar/regex.h"

namespace memra::grammar {

namespace {

int32_t digit_range(Grammar& g, char lo, char hi) {
  return g.byte_range(static_cast<uint8_t>(lo), static_cast<uint8_t>(hi));
}

int32_t any_digits(Grammar& g, size_t n) { return g.repeat(digit_range(g, '0', '9'), static_cast<int32_t>(n), static_cast<int32_t>(n)); }

// Digit strings of equal length between x and y (inclusive, x <= y), leading zeros allowed.
int32_t same_length(Grammar& g, const std::string& x, const std::string& y) {
  if (x.empty()) return g.empty();
  const size_t rest = x.size() - 1;
  if (x[0] == y[0]) return g.seq({digit_range(g, x[0], x[0]), same_length(g, x.substr(1), y.substr(1))});
  const std::string zeros(rest, '0'), nines(rest, '9');
  if (x.substr(1) == zeros && y.substr(1) == nines) return g.seq({digit_range(g, x[0], y[0]), any_digits(g, rest)});
  std::vector<int32_t> alts;
  char lo_first = x[0], hi_first = y[0];
  if (x.substr(1) != zeros) {
    alts.push_back(g.seq({digit_range(g, x[0], x[0]), same_length(g, x.substr(1), nines)}));
    ++lo_first;
  }
  const bool y_full = y.substr(1) == nines;
  if (!y_full) --hi_first;
  if (lo_first <= hi_first) alts.push_back(g.seq({digit_range(g, lo_first, hi_first), any_digits(g, rest)}));
  if (!y_full) alts.push_back(g.seq({digit_range(g, y[0], y[0]), same_length(g, zeros, y.substr(1))}));
  return g.alt(std::move(alts));
}

uint64_t pow10(size_t n) {
  uint64_t p = 1;
  for (size_t i = 0; i < n; ++i) p *= 10;
  return p;
}

// Non-negative integers in [a, b] (b nullopt: open), no leading zeros.
int32_t natural_range(Grammar& g, uint64_t a, std::optional<uint64_t> b) {
  std::vector<int32_t> alts;
  const std::string as = std::to_string(a);
  const size_t max_len = b ? std::to_string(*b).size() : as.size();
  for (size_t len = as.size(); len <= max_len; ++len) {
    const uint64_t lo = std::max<uint64_t>(a, len == 1 ? 0 : pow10(len - 1));
    const uint64_t hi_len = len >= 20 ? UINT64_MAX : pow10(len) - 1;
    const uint64_t hi = b ? std::min<uint64_t>(*b, hi_len) : hi_len;
    if (lo > hi) continue;
    alts.push_back(same_length(g, std::to_string(lo), std::to_string(hi)));
  }
  if (!b) {
    // Every number with more digits than a.
    alts.push_back(g.seq({digit_range(g, '1', '9'), g.repeat(digit_range(g, '0', '9'), static_cast<int32_t>(as.size()), -1)}));
  }
  return g.alt(std::move(alts));
}

int32_t fraction(Grammar& g) { return g.seq({g.literal("."), g.repeat(digit_range(g, '0', '9'), 1, -1)}); }

}  // namespace

int32_t integer_range_expr(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<int32_t> alts;
  // Negative part: -n for n in [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    const uint64_t n_lo = (hi && *hi < 0) ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> n_hi;
    if (lo) n_hi = static_cast<uint64_t>(-(*lo + 1)) + 1;
    if (!n_hi || n_lo <= *n_hi) alts.push_back(g.seq({g.literal("-"), natural_range(g, n_lo, n_hi)}));
  }
  if (!hi || *hi >= 0) {
    const uint64_t a = (lo && *lo > 0) ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> b;
    if (hi) b = static_cast<uint64_t>(*hi);
    if (!b || a <= *b) alts.push_back(natural_range(g, a, b));
  }
  if (alts.empty()) grammar_fail("the integer range [{}, {}] is empty", lo ? std::to_string(*lo) : "-inf",
                                 hi ? std::to_string(*hi) : "inf");
  return g.alt(std::move(alts));
}

int32_t any_number_expr(Grammar& g) {
  const int32_t integer = integer_range_expr(g, std::nullopt, std::nullopt);
  const int32_t exponent = g.seq({g.bytes([] { ByteSet s; s.set('e'); s.set('E'); return s; }()),
                                  g.repeat(g.bytes([] { ByteSet s; s.set('+'); s.set('-'); return s; }()), 0, 1),
                                  g.repeat(digit_range(g, '0', '9'), 1, -1)});
  return g.seq({integer, g.repeat(fraction(g), 0, 1), g.repeat(exponent, 0, 1)});
}

int32_t number_range_expr(Grammar& g, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<int32_t> alts{integer_range_expr(g, lo, hi)};
  // Non-negative decimals I.f with I in [max(lo, 0), hi - 1]: I.f lies in [I, I + 1).
  {
    const int64_t a = lo ? std::max<int64_t>(*lo, 0) : 0;
    if (!hi || *hi - 1 >= a) {
      std::optional<int64_t> b;
      if (hi) b = *hi - 1;
      alts.push_back(g.seq({integer_range_expr(g, a, b), fraction(g)}));
    }
  }
  // Negative decimals -I.f with I in [max(0, -hi), -lo - 1]: -I.f lies in (-(I + 1), -I].
  {
    const int64_t a = hi ? std::max<int64_t>(0, -*hi) : 0;
    std::optional<int64_t> b;
    if (lo) b = -*lo - 1;
    if (!b || *b >= a) alts.push_back(g.seq({g.literal("-"), integer_range_expr(g, a, b), fraction(g)}));
  }
  return g.alt(std::move(alts));
}

int32_t string_format_expr(Grammar& g, std::string_view format) {
  // Patterns written for this project from the formats' definitions (RFC 3339, RFC 4122, ...),
  // kept conservative: what they accept is valid, not everything valid is accepted.
  // Days per month; February stops at 28 (a leap day is valid only in leap years).
  static constexpr std::string_view kDate =
      R"(\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2[0-8])))";
  static constexpr std::string_view kTime = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d{1,6})?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";
  std::string pattern;
  if (format == "date") pattern = kDate;
  else if (format == "time") pattern = kTime;
  else if (format == "date-time") pattern.append(kDate).append("T").append(kTime);
  else if (format == "uuid") pattern = R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})";
  else if (format == "ipv4") pattern = R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))";
  else if (format == "email") pattern = R"([a-zA-Z0-9_+-]+(\.[a-zA-Z0-9_+-]+)*@[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?)+)";
  else if (format == "hostname") pattern = R"([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*)";
  else if (format == "uri") pattern = R"([a-zA-Z][a-zA-Z0-9+.-]*:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+)";
  else return -1;
  return regex_expr(g, pattern, RegexTarget::JsonString);
}

}  // namespace memra::grammar

#include "grammar/text_parse.h"

#include <fmt/format.h>

namespace memra::grammar {

uint32_t next_codepoint(std::string_view s, size_t& pos, const char* what) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  int n = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || pos + static_cast<size_t>(n) > s.size()) grammar_fail("{} is not valid UTF-8 (at byte {})", what, pos);
  uint32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1Fu) : n == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
  for (int i = 1; i < n; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + static_cast<size_t>(i)]);
    if ((b & 0xC0) != 0x80) grammar_fail("{} is not valid UTF-8 (at byte {})", what, pos);
    cp = (cp << 6) | (b & 0x3Fu);
  }
  pos += static_cast<size_t>(n);
  return cp;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint32_t read_hex(std::string_view s, size_t& pos, int digits, const char* what) {
  uint32_t v = 0;
  for (int i = 0; i < digits; ++i) {
    if (pos >= s.size()) grammar_fail("{}: expected {} hex digits at the end", what, digits);
    const char c = s[pos++];
    uint32_t d;
    if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
    else grammar_fail("{}: expected a hex digit at byte {}, got '{}'", what, pos - 1, c);
    v = v * 16 + d;
  }
  return v;
}

int32_t json_string_chars(Grammar& g, const CodepointSet& set_in) {
  CodepointSet set = set_in;
  set.normalize();
  CodepointSet plain;
  std::vector<int32_t> alts;
  // All 32 control characters: one \u00XX pattern and the short escapes instead of 32 literals.
  const bool all_controls = !set.ranges.empty() && set.ranges[0].first == 0 && set.ranges[0].second >= 0x1F;
  if (all_controls) {
    ByteSet short_forms, hex;
    for (char c : std::string("bfnrt")) short_forms.set(static_cast<uint8_t>(c));
    hex.set_range('0', '9');
    hex.set_range('a', 'f');
    hex.set_range('A', 'F');
    alts.push_back(g.seq({g.literal("\\"), g.bytes(short_forms)}));
    alts.push_back(g.seq({g.literal("\\u00"), g.byte_range('0', '1'), g.bytes(hex)}));
  }
  for (auto [lo, hi] : set.ranges) {
    for (uint32_t cp = lo; cp <= std::min(hi, 0x5Cu); ++cp) {
      if (cp >= 0x20 && cp != '"' && cp != '\\') continue;
      if (cp < 0x20 && all_controls) continue;
      switch (cp) {
        case '"': alts.push_back(g.literal("\\\"")); break;
        case '\\': alts.push_back(g.literal("\\\\")); break;
        case '\n': alts.push_back(g.literal("\\n")); break;
        case '\t': alts.push_back(g.literal("\\t")); break;
        case '\r': alts.push_back(g.literal("\\r")); break;
        case '\b': alts.push_back(g.literal("\\b")); break;
        case '\f': alts.push_back(g.literal("\\f")); break;
        default: alts.push_back(g.literal(fmt::format("\\u{:04x}", cp))); break;
      }
    }
    // Printable parts of the range.
    auto keep = [&](uint32_t a, uint32_t b) {
      if (a <= b) plain.ranges.emplace_back(a, b);
    };
    const uint32_t a = std::max(lo, 0x20u);
    if (a > hi) continue;
    // Split around '"' (0x22) and '\\' (0x5C).
    uint32_t cur = a;
    for (uint32_t cut : {0x22u, 0x5Cu}) {
      if (cut < cur || cut > hi) continue;
      keep(cur, cut - 1);
      cur = cut + 1;
    }
    keep(cur, hi);
  }
  if (!plain.ranges.empty()) alts.insert(alts.begin(), g.codepoints(plain));
  return g.alt(std::move(alts));
}

}  // namespace memra::grammar

// Python str semantics over UTF-8 (see jinja_pystr.h).
#include "chat/jinja_pystr.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <system_error>

#include <fmt/format.h>
#include <utf8proc.h>

namespace memra::chat::jinja {

char32_t utf8_next(std::string_view s, size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int n = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) n = 1, cp = b0 & 0x1F;
  else if ((b0 & 0xF0) == 0xE0) n = 2, cp = b0 & 0x0F;
  else if ((b0 & 0xF8) == 0xF0) n = 3, cp = b0 & 0x07;
  else {
    ++i;
    return b0;  // stray continuation or invalid lead byte: one byte, one "code point"
  }
  if (i + n >= s.size()) {
    ++i;
    return b0;
  }
  for (int k = 1; k <= n; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return b0;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid: keep them byte-wise.
  static const char32_t kMin[4] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    ++i;
    return b0;
  }
  i += n + 1;
  return cp;
}

void utf8_append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

size_t utf8_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) ++i;
    else utf8_next(s, i);
    ++n;
  }
  return n;
}

std::vector<size_t> utf8_offsets(std::string_view s) {
  std::vector<size_t> off;
  off.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size();) {
    off.push_back(i);
    utf8_next(s, i);
  }
  off.push_back(s.size());
  return off;
}

bool py_isspace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

namespace {

// Code points of `s` with their byte spans, for operations that walk from either end.
struct Decoded {
  std::vector<char32_t> cps;
  std::vector<size_t> off;  // off[k] = byte offset of cps[k]; off.back() = size
};
Decoded decode(std::string_view s) {
  Decoded d;
  for (size_t i = 0; i < s.size();) {
    d.off.push_back(i);
    d.cps.push_back(utf8_next(s, i));
  }
  d.off.push_back(s.size());
  return d;
}

bool in_chars(char32_t c, const std::vector<char32_t>& set) {
  for (char32_t x : set)
    if (x == c) return true;
  return false;
}

std::string map_case(std::string_view s, utf8proc_int32_t (*fn)(utf8proc_int32_t), char (*ascii)(char)) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) {
      out += ascii(char(b));
      ++i;
      continue;
    }
    size_t start = i;
    char32_t cp = utf8_next(s, i);
    if (i - start == 1) {
      out += char(b);  // invalid byte: copied as is
      continue;
    }
    utf8_append(out, char32_t(fn(utf8proc_int32_t(cp))));
  }
  return out;
}
char ascii_lower(char c) { return (c >= 'A' && c <= 'Z') ? char(c + 32) : c; }
char ascii_upper(char c) { return (c >= 'a' && c <= 'z') ? char(c - 32) : c; }

bool is_cased(char32_t cp) {
  if (cp < 0x80) return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  auto cat = utf8proc_category(utf8proc_int32_t(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

}  // namespace

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  Decoded d = decode(s);
  std::vector<char32_t> set;
  if (chars) {
    Decoded c = decode(*chars);
    set = std::move(c.cps);
  }
  auto strip_it = [&](char32_t c) { return chars ? in_chars(c, set) : py_isspace(c); };
  size_t b = 0, e = d.cps.size();
  if (left)
    while (b < e && strip_it(d.cps[b])) ++b;
  if (right)
    while (e > b && strip_it(d.cps[e - 1])) --e;
  return std::string(s.substr(d.off[b], d.off[e] - d.off[b]));
}

std::vector<std::string> py_split_ws(std::string_view s, int64_t maxsplit) {
  Decoded d = decode(s);
  std::vector<std::string> out;
  size_t n = d.cps.size(), i = 0;
  uint64_t budget = maxsplit < 0 ? UINT64_MAX : uint64_t(maxsplit);
  auto piece = [&](size_t a, size_t b) { out.emplace_back(s.substr(d.off[a], d.off[b] - d.off[a])); };
  while (budget-- > 0) {
    while (i < n && py_isspace(d.cps[i])) ++i;
    if (i == n) break;
    size_t j = i++;
    while (i < n && !py_isspace(d.cps[i])) ++i;
    piece(j, i);
  }
  if (i < n) {
    while (i < n && py_isspace(d.cps[i])) ++i;
    if (i != n) piece(i, n);
  }
  return out;
}

std::vector<std::string> py_rsplit_ws(std::string_view s, int64_t maxsplit) {
  Decoded d = decode(s);
  std::vector<std::string> rev;
  int64_t i = int64_t(d.cps.size()) - 1;
  uint64_t budget = maxsplit < 0 ? UINT64_MAX : uint64_t(maxsplit);
  auto piece = [&](int64_t a, int64_t b) {  // code points [a, b)
    rev.emplace_back(s.substr(d.off[size_t(a)], d.off[size_t(b)] - d.off[size_t(a)]));
  };
  while (budget-- > 0) {
    while (i >= 0 && py_isspace(d.cps[size_t(i)])) --i;
    if (i < 0) break;
    int64_t j = i--;
    while (i >= 0 && !py_isspace(d.cps[size_t(i)])) --i;
    piece(i + 1, j + 1);
  }
  if (i >= 0) {
    while (i >= 0 && py_isspace(d.cps[size_t(i)])) --i;
    if (i >= 0) piece(0, i + 1);
  }
  return {rev.rbegin(), rev.rend()};
}

std::vector<std::string> py_split(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t pos = 0;
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    size_t hit = s.find(sep, pos);
    if (hit == std::string_view::npos) break;
    out.emplace_back(s.substr(pos, hit - pos));
    pos = hit + sep.size();
    ++splits;
  }
  out.emplace_back(s.substr(pos));
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, std::string_view sep, int64_t maxsplit) {
  std::vector<std::string> rev;
  size_t end = s.size();
  int64_t splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep.size()) break;
    size_t hit = s.rfind(sep, end - sep.size());
    if (hit == std::string_view::npos) break;
    rev.emplace_back(s.substr(hit + sep.size(), end - hit - sep.size()));
    end = hit;
    ++splits;
  }
  rev.emplace_back(s.substr(0, end));
  return {rev.rbegin(), rev.rend()};
}

std::vector<std::string> py_splitlines(std::string_view s, bool keepends) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < s.size();) {
    size_t at = i;
    char32_t c = utf8_next(s, i);
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
               c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    if (c == '\r' && i < s.size() && s[i] == '\n') ++i;
    out.emplace_back(s.substr(start, (keepends ? i : at) - start));
    start = i;
  }
  if (start < s.size()) out.emplace_back(s.substr(start));
  return out;
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every code point and at the end.
    int64_t done = 0;
    size_t i = 0;
    while (i < s.size()) {
      if (count < 0 || done < count) out += repl, ++done;
      size_t start = i;
      utf8_next(s, i);
      out.append(s.substr(start, i - start));
    }
    if (count < 0 || done < count) out += repl;
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t hit = s.find(old, pos);
    if (hit == std::string_view::npos) break;
    out.append(s.substr(pos, hit - pos));
    out.append(repl);
    pos = hit + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  return out;
}

std::string py_lower(std::string_view s) { return map_case(s, utf8proc_tolower, ascii_lower); }
std::string py_upper(std::string_view s) { return map_case(s, utf8proc_toupper, ascii_upper); }

std::string py_title(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    char32_t cp = utf8_next(s, i);
    if (i - start == 1 && cp >= 0x80) {
      out += s[start];
      prev_cased = false;
      continue;
    }
    char32_t mapped = prev_cased ? char32_t(utf8proc_tolower(utf8proc_int32_t(cp)))
                                 : char32_t(utf8proc_totitle(utf8proc_int32_t(cp)));
    utf8_append(out, mapped);
    prev_cased = is_cased(cp);
  }
  return out;
}

std::string py_capitalize(std::string_view s) {
  if (s.empty()) return {};
  size_t i = 0;
  char32_t first = utf8_next(s, i);
  std::string out;
  if (i == 1 && first >= 0x80) out += s[0];
  else utf8_append(out, char32_t(utf8proc_totitle(utf8proc_int32_t(first))));
  out += py_lower(s.substr(i));
  return out;
}

std::string py_float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  if (d == 0) return std::signbit(d) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form: "-d.ddde+XX".
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string_view sci(buf, size_t(res.ptr - buf));
  bool neg = sci[0] == '-';
  if (neg) sci.remove_prefix(1);
  size_t epos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, epos))
    if (c != '.') digits += c;
  int exp10 = std::atoi(std::string(sci.substr(epos + 1)).c_str());
  int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = neg ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (digits.size() > 1) out += "." + digits.substr(1);
    out += fmt::format("e{}{:02d}", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  } else if (decpt <= 0) {
    out += "0." + std::string(size_t(-decpt), '0') + digits;
  } else if (size_t(decpt) >= digits.size()) {
    out += digits + std::string(size_t(decpt) - digits.size(), '0') + ".0";
  } else {
    out += digits.substr(0, size_t(decpt)) + "." + digits.substr(size_t(decpt));
  }
  return out;
}

std::string py_str_repr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (size_t i = 0; i < s.size();) {
    size_t start = i;
    char32_t cp = utf8_next(s, i);
    if (cp == char32_t(quote) || cp == '\\') {
      out += '\\';
      out += char(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp < 0x20 || cp == 0x7F || (i - start == 1 && cp >= 0x80)) {
      out += fmt::format("\\x{:02x}", unsigned(cp));
    } else if (cp < 0x80) {
      out += char(cp);
    } else {
      auto cat = utf8proc_category(utf8proc_int32_t(cp));
      bool printable = !(cat == UTF8PROC_CATEGORY_CC || cat == UTF8PROC_CATEGORY_CF || cat == UTF8PROC_CATEGORY_CS ||
                         cat == UTF8PROC_CATEGORY_CO || cat == UTF8PROC_CATEGORY_CN || cat == UTF8PROC_CATEGORY_ZL ||
                         cat == UTF8PROC_CATEGORY_ZP || cat == UTF8PROC_CATEGORY_ZS);
      if (printable) out.append(s.substr(start, i - start));
      else if (cp < 0x100) out += fmt::format("\\x{:02x}", unsigned(cp));
      else if (cp < 0x10000) out += fmt::format("\\u{:04x}", unsigned(cp));
      else out += fmt::format("\\U{:08x}", unsigned(cp));
    }
  }
  out += quote;
  return out;
}

void json_quote(std::string_view s, bool ensure_ascii, std::string& out) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    auto b = static_cast<unsigned char>(s[i]);
    if (b >= 0x20 && b < 0x7F && b != '"' && b != '\\') {
      out += char(b);
      ++i;
      continue;
    }
    size_t start = i;
    char32_t cp = utf8_next(s, i);
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp == 0x7F)) {
      out += fmt::format("\\u{:04x}", unsigned(cp));
    } else if (!ensure_ascii || cp < 0x80) {
      out.append(s.substr(start, i - start));
    } else if (cp < 0x10000) {
      out += fmt::format("\\u{:04x}", unsigned(cp));
    } else {
      char32_t v = cp - 0x10000;
      out += fmt::format("\\u{:04x}\\u{:04x}", unsigned(0xD800 + (v >> 10)), unsigned(0xDC00 + (v & 0x3FF)));
    }
  }
  out += '"';
}

}  // namespace memra::chat::jinja

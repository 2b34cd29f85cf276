#include "grammar/unique_items.h"

#include <cstdint>

#include "grammar/text_parse.h"

namespace memra::grammar {

namespace {

constexpr size_t kNone = std::string_view::npos;

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// text[i] is a '"': whether it delimits a string (an even number of backslashes before it).
bool delimiter(std::string_view t, size_t i) {
  size_t n = 0;
  while (n < i && t[i - 1 - n] == '\\') ++n;
  return n % 2 == 0;
}

// The last delimiting quote before position `end`, or kNone.
size_t prev_quote(std::string_view t, size_t end) {
  for (size_t i = end; i-- > 0;)
    if (t[i] == '"' && delimiter(t, i)) return i;
  return kNone;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool read_u4(std::string_view raw, size_t pos, uint32_t& v) {
  if (pos + 4 > raw.size()) return false;
  v = 0;
  for (size_t i = pos; i < pos + 4; ++i) {
    const int h = hex_value(raw[i]);
    if (h < 0) return false;
    v = v * 16 + static_cast<uint32_t>(h);
  }
  return true;
}

enum class Scan { Array, NotArray, TextEnds };

// Calls on_item(decoded) for each item before the one whose opening quote is text[open], nearest
// first, until on_item returns true (Scan::Array then) or the array's '[' is reached.
template <typename OnItem>
Scan earlier_items(std::string_view t, size_t open, OnItem&& on_item) {
  size_t k = open;
  std::string item;
  while (true) {
    while (k > 0 && is_ws(t[k - 1])) --k;
    if (k == 0) return Scan::TextEnds;
    if (t[k - 1] == '[') return Scan::Array;
    if (t[k - 1] != ',') return Scan::NotArray;
    --k;
    while (k > 0 && is_ws(t[k - 1])) --k;
    if (k == 0) return Scan::TextEnds;
    if (t[k - 1] != '"' || !delimiter(t, k - 1)) return Scan::NotArray;
    const size_t close = k - 1;
    const size_t o = prev_quote(t, close);
    if (o == kNone) return Scan::TextEnds;
    if (!decode_json_string(t.substr(o + 1, close - o - 1), item)) return Scan::NotArray;
    if (on_item(item)) return Scan::Array;
    k = o;
  }
}

}  // namespace

bool decode_json_string(std::string_view raw, std::string& out) {
  out.clear();
  for (size_t i = 0; i < raw.size();) {
    const char c = raw[i];
    if (c == '"') return false;
    if (c != '\\') {
      out.push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= raw.size()) return false;
    const char e = raw[i + 1];
    i += 2;
    switch (e) {
      case '"': out.push_back('"'); continue;
      case '\\': out.push_back('\\'); continue;
      case '/': out.push_back('/'); continue;
      case 'b': out.push_back('\b'); continue;
      case 'f': out.push_back('\f'); continue;
      case 'n': out.push_back('\n'); continue;
      case 'r': out.push_back('\r'); continue;
      case 't': out.push_back('\t'); continue;
      case 'u': break;
      default: return false;
    }
    uint32_t cp = 0;
    if (!read_u4(raw, i, cp)) return false;
    i += 4;
    uint32_t low = 0;
    if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 <= raw.size() && raw[i] == '\\' && raw[i + 1] == 'u' &&
        read_u4(raw, i + 2, low) && low >= 0xDC00 && low <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
      i += 6;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) {  // lone surrogate: its own 3-byte form
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      append_utf8(out, cp);
    }
  }
  return true;
}

bool string_item_is_new(std::string_view t) {
  if (t.empty() || t.back() != '"') return true;
  const size_t close = t.size() - 1;
  const size_t open = prev_quote(t, close);
  if (open == kNone) return true;
  std::string item;
  if (!decode_json_string(t.substr(open + 1, close - open - 1), item)) return true;
  bool duplicate = false;
  earlier_items(t, open, [&](const std::string& e) { return duplicate = (e == item); });
  return !duplicate;
}

bool open_string_item(std::string_view t, std::string_view& raw, std::vector<std::string>& earlier) {
  earlier.clear();
  size_t quotes = 0;
  for (size_t i = 0; i < t.size(); ++i) quotes += t[i] == '"' && delimiter(t, i);
  if (quotes % 2 == 0) return false;  // not inside a string
  const size_t open = prev_quote(t, t.size());
  if (open == kNone) return false;
  raw = t.substr(open + 1);
  return earlier_items(t, open, [&](const std::string& e) {
           earlier.push_back(e);
           return false;
         }) == Scan::Array;
}

}  // namespace memra::grammar

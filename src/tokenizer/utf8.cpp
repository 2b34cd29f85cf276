#include "tokenizer/utf8.h"

#include "common/error.h"

namespace memra::utf8 {

Scan scan(std::string_view s) {
  MEMRA_ASSERT(!s.empty());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const unsigned char lead = p[0];
  if (lead < 0x80) return {Status::Valid, 1};

  // Total length and the allowed range of the second byte depend on the lead byte; every later
  // byte is a plain continuation (80..BF). C0, C1 and F5..FF never start a sequence.
  size_t need = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead == 0xE0) {
    need = 3, lo = 0xA0;  // no overlongs
  } else if (lead >= 0xE1 && lead <= 0xEC) {
    need = 3;
  } else if (lead == 0xED) {
    need = 3, hi = 0x9F;  // no surrogates (D800..DFFF)
  } else if (lead >= 0xEE && lead <= 0xEF) {
    need = 3;
  } else if (lead == 0xF0) {
    need = 4, lo = 0x90;  // no overlongs
  } else if (lead >= 0xF1 && lead <= 0xF3) {
    need = 4;
  } else if (lead == 0xF4) {
    need = 4, hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return {Status::Invalid, 1};
  }

  size_t i = 1;
  for (; i < need; ++i) {
    if (i >= s.size()) return {Status::Incomplete, i};
    const unsigned char c = p[i];
    const unsigned char l = (i == 1) ? lo : 0x80;
    const unsigned char h = (i == 1) ? hi : 0xBF;
    if (c < l || c > h) return {Status::Invalid, i};
  }
  return {Status::Valid, need};
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII runs are the common case; skip them without the full classification.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    Scan r = scan(s.substr(i));
    if (r.status != Status::Valid) return false;
    i += r.length;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    Scan r = scan(s.substr(i));
    if (r.status == Status::Valid) {
      out.append(s.substr(i, r.length));
    } else {
      out.append(kReplacement);
    }
    i += r.length;
  }
  return out;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    MEMRA_ASSERT(cp <= 0x10FFFF, "code point {:#x} out of range", cp);
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

uint32_t next(std::string_view s, size_t& pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  const size_t left = s.size() - pos;
  MEMRA_ASSERT(left > 0);
  uint32_t cp;
  size_t len;
  if (p[0] < 0x80) {
    cp = p[0], len = 1;
  } else if (p[0] < 0xE0) {
    cp = p[0] & 0x1F, len = 2;
  } else if (p[0] < 0xF0) {
    cp = p[0] & 0x0F, len = 3;
  } else {
    cp = p[0] & 0x07, len = 4;
  }
  MEMRA_ASSERT(len <= left, "truncated UTF-8 sequence (input was not validated)");
  for (size_t i = 1; i < len; ++i) cp = (cp << 6) | (p[i] & 0x3F);
  pos += len;
  return cp;
}

}  // namespace memra::utf8

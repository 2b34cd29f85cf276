#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace memra::byte_level {
namespace {

bool stands_for_itself(uint32_t b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<uint32_t, 256> code_point{};
  std::array<std::string, 256> utf8;
  // Inverse over U+0000..U+01FF (every mapped code point is below U+0144); -1 = not mapped.
  std::array<int16_t, 512> byte_of{};

  Tables() {
    byte_of.fill(-1);
    uint32_t shifted = 0;
    for (uint32_t b = 0; b < 256; ++b) {
      const uint32_t cp = stands_for_itself(b) ? b : 256 + shifted++;
      code_point[b] = cp;
      utf8::append(utf8[b], cp);
      byte_of[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

uint32_t byte_to_code_point(uint8_t b) { return tables().code_point[b]; }

std::string_view byte_to_utf8(uint8_t b) { return tables().utf8[b]; }

bool decode(std::string_view text, std::string& out) {
  const Tables& t = tables();
  bool clean = true;
  size_t i = 0;
  while (i < text.size()) {
    utf8::Scan r = utf8::scan(text.substr(i));
    if (r.status != utf8::Status::Valid) {
      out.append(text.substr(i, r.length));
      clean = false;
      i += r.length;
      continue;
    }
    const size_t start = i;
    const uint32_t cp = utf8::next(text, i);
    if (cp < t.byte_of.size() && t.byte_of[cp] >= 0) {
      out.push_back(static_cast<char>(t.byte_of[cp]));
    } else {
      out.append(text.substr(start, i - start));
      clean = false;
    }
  }
  return clean;
}

}  // namespace memra::byte_level

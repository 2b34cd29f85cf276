// GPT-2's byte-level alphabet: each of the 256 byte values stands for one printable code point,
// so that any byte string becomes a string of visible characters. Bytes 21..7E, A1..AC and
// AE..FF stand for the code point of the same value; the other 68 bytes (controls, space, DEL,
// NBSP, soft hyphen) take U+0100, U+0101, ... in increasing byte order. Vocab strings of normal
// tokens in `tokenizer.ggml.tokens` are written in this alphabet ("Ġ" = U+0120 is a space).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memra::byte_level {

// The code point byte b stands for.
uint32_t byte_to_code_point(uint8_t b);

// The UTF-8 encoding of byte_to_code_point(b) (1 or 2 bytes).
std::string_view byte_to_utf8(uint8_t b);

// Maps a vocab string back to the bytes it stands for, appending them to `out`. A code point
// outside the alphabet (not produced by a byte-level vocab, but a file may hold one) is copied
// as its own UTF-8 bytes. Returns false if that happened or `text` was not valid UTF-8.
bool decode(std::string_view text, std::string& out);

}  // namespace memra::byte_level

// Python str semantics over UTF-8 bytes: lengths, indices and slices count code points, not
// bytes; strip/split/whitespace use Python's Unicode whitespace set; case mapping uses utf8proc.
// Invalid UTF-8 (possible in a template read from a GGUF) is treated one byte per code point,
// so no operation ever loses or invents bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace memra::chat::jinja {

// Decodes the code point starting at s[i] and advances i (by 1 for an invalid byte).
char32_t utf8_next(std::string_view s, size_t& i);
void utf8_append(std::string& out, char32_t cp);
size_t utf8_length(std::string_view s);
// Byte offset of every code point, plus s.size() at the end.
std::vector<size_t> utf8_offsets(std::string_view s);

bool py_isspace(char32_t c);
// Python str.strip/lstrip/rstrip; `chars == nullptr` means whitespace.
std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right);
// Python str.split(sep=None, maxsplit) (whitespace runs) and str.split(sep, maxsplit).
std::vector<std::string> py_split_ws(std::string_view s, int64_t maxsplit);
std::vector<std::string> py_rsplit_ws(std::string_view s, int64_t maxsplit);
std::vector<std::string> py_split(std::string_view s, std::string_view sep, int64_t maxsplit);
std::vector<std::string> py_rsplit(std::string_view s, std::string_view sep, int64_t maxsplit);
std::vector<std::string> py_splitlines(std::string_view s, bool keepends);
std::string py_replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string py_lower(std::string_view s);
std::string py_upper(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

// float.__repr__: shortest round-trip digits, exponent form outside [1e-4, 1e16).
std::string py_float_repr(double d);
// repr() of a str: quotes chosen and escapes applied the way Python does.
std::string py_str_repr(std::string_view s);
// Appends s as a JSON string literal the way json.dumps does.
void json_quote(std::string_view s, bool ensure_ascii, std::string& out);

}  // namespace memra::chat::jinja

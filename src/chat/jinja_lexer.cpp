// Jinja lexer with transformers' settings (trim_blocks and lstrip_blocks on).
//
// Whitespace rules, as Jinja 3 applies them:
// - `{%-`, `{{-`, `{#-` strip all whitespace (newlines included) before the tag;
//   `-%}`, `-}}`, `-#}` strip all whitespace after it.
// - trim_blocks: one newline right after `%}` or `#}` is dropped (not after `}}`; `+%}` keeps it).
// - lstrip_blocks: spaces/tabs between the start of a line and `{%` or `{#` are dropped (not
//   before `{{`; `{%+` keeps them). "Start of a line" includes the position right after a tag
//   whose match ended in a newline, e.g. `%}\n` with trim_blocks.
// - Newlines (\r\n, \r, \n) become \n and a single trailing newline of the template is dropped.
#include <cctype>
#include <cstring>

#include <fmt/format.h>

#include "chat/jinja_ast.h"
#include "chat/jinja_pystr.h"

namespace memra::chat::jinja {

void syntax_error(int line, const std::string& message) {
  throw TemplateError(fmt::format("chat template syntax error at line {}: {}", line, message));
}

namespace {

std::string normalize_newlines(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || (c & 0x80); }
bool is_name_char(char c) { return is_name_start(c) || std::isdigit(static_cast<unsigned char>(c)); }

// Python str.rstrip() with its Unicode whitespace set.
std::string rstrip_all(std::string_view s) { return py_strip(s, nullptr, false, true); }

class Lexer {
 public:
  explicit Lexer(std::string_view src) : s_(normalize_newlines(src)) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) root_step();
    push(Tok::Eof, "");
    return std::move(out_);
  }

 private:
  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> out_;

  void push(Tok t, std::string text) {
    Token tok;
    tok.type = t;
    tok.text = std::move(text);
    tok.line = line_;
    out_.push_back(std::move(tok));
  }
  void advance_to(size_t p) {
    for (size_t i = pos_; i < p; ++i)
      if (s_[i] == '\n') ++line_;
    pos_ = p;
  }
  bool starts(size_t p, std::string_view what) const { return s_.compare(p, what.size(), what) == 0; }
  // Python's `\s*` (Unicode whitespace).
  size_t skip_ws(size_t p) const {
    while (p < s_.size()) {
      size_t q = p;
      if (!py_isspace(utf8_next(s_, q))) break;
      p = q;
    }
    return p;
  }

  static size_t skip_ws_in(std::string_view t, size_t p) {
    while (p < t.size()) {
      size_t q = p;
      if (!py_isspace(utf8_next(t, q))) break;
      p = q;
    }
    return p;
  }

  // Emits the text before a tag, applying `-` stripping or lstrip_blocks.
  void emit_text(size_t from, size_t to, char sign, bool is_variable) {
    std::string text = s_.substr(from, to - from);
    if (sign == '-') {
      text = rstrip_all(text);
    } else if (sign != '+' && !is_variable) {
      size_t nl = text.rfind('\n');
      size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() && skip_ws_in(text, l_pos) == text.size())
        text.resize(l_pos);
    }
    int start_line = line_;
    advance_to(to);
    if (!text.empty()) {
      Token tok;
      tok.type = Tok::Data;
      tok.text = std::move(text);
      tok.line = start_line;
      out_.push_back(std::move(tok));
    }
  }

  void root_step() {
    size_t tag = pos_;
    for (;;) {
      tag = s_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= s_.size()) {
        emit_text(pos_, s_.size(), 0, true);
        return;
      }
      char c = s_[tag + 1];
      if (c == '{' || c == '%' || c == '#') break;
      ++tag;
    }
    char kind = s_[tag + 1];
    char sign = (tag + 2 < s_.size() && (s_[tag + 2] == '-' || s_[tag + 2] == '+')) ? s_[tag + 2] : 0;
    size_t after = tag + 2 + (sign ? 1 : 0);
    if (kind == '%' && try_raw(tag, sign, after)) return;
    emit_text(pos_, tag, sign, kind == '{');
    line_starting_ = false;
    advance_to(after);
    if (kind == '#') comment();
    else if (kind == '{') tag_body(false);
    else tag_body(true);
  }

  // `{% raw %}...{% endraw %}`: the body is data, untouched.
  bool try_raw(size_t tag, char sign, size_t after) {
    size_t p = skip_ws(after);
    if (!starts(p, "raw")) return false;
    p = skip_ws(p + 3);
    size_t body;
    if (starts(p, "-%}")) body = skip_ws(p + 3);
    else if (starts(p, "%}")) body = p + 2;
    else return false;
    emit_text(pos_, tag, sign, false);
    int open_line = line_;
    advance_to(body);
    line_starting_ = s_[body - 1] == '\n';
    // Find `{%[-+]? endraw [-+]?%}`.
    for (size_t q = body;; ++q) {
      q = s_.find("{%", q);
      if (q == std::string::npos) syntax_error(open_line, "missing end of raw directive ({% endraw %})");
      char esign = (q + 2 < s_.size() && (s_[q + 2] == '-' || s_[q + 2] == '+')) ? s_[q + 2] : 0;
      size_t r = skip_ws(q + 2 + (esign ? 1 : 0));
      if (!starts(r, "endraw")) continue;
      r = skip_ws(r + 6);
      size_t end;
      if (starts(r, "+%}")) end = r + 3;
      else if (starts(r, "-%}")) end = skip_ws(r + 3);
      else if (starts(r, "%}")) end = r + 2 + ((r + 2 < s_.size() && s_[r + 2] == '\n') ? 1 : 0);
      else continue;
      emit_text(pos_, q, esign, false);
      advance_to(end);
      line_starting_ = s_[end - 1] == '\n';
      return true;
    }
  }

  void comment() {
    size_t q = s_.find("#}", pos_);
    if (q == std::string::npos) syntax_error(line_, "missing end of comment tag (#})");
    char sign = (q > pos_ && (s_[q - 1] == '-' || s_[q - 1] == '+')) ? s_[q - 1] : 0;
    size_t end = q + 2;
    if (sign == '-') end = skip_ws(end);
    else if (sign == 0 && end < s_.size() && s_[end] == '\n') ++end;
    advance_to(end);
    line_starting_ = s_[end - 1] == '\n';
  }

  // Tokens of `{{ ... }}` or `{% ... %}` up to and including the end tag.
  void tag_body(bool block) {
    int open_line = line_;
    push(block ? Tok::BlockBegin : Tok::VarBegin, "");
    std::string balance;  // closing brackets expected, innermost last
    for (;;) {
      if (pos_ >= s_.size())
        syntax_error(open_line, fmt::format("unexpected end of template: '{}' was never closed with '{}'",
                                            block ? "{%" : "{{", block ? "%}" : "}}"));
      if (balance.empty() && end_tag(block)) return;
      char c = s_[pos_];
      if (size_t w = skip_ws(pos_); w != pos_) {
        advance_to(w);
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        number();
        continue;
      }
      if (is_name_start(c)) {
        size_t e = pos_;
        while (e < s_.size() && is_name_char(s_[e])) ++e;
        push(Tok::Name, s_.substr(pos_, e - pos_));
        advance_to(e);
        continue;
      }
      if (c == '\'' || c == '"') {
        string_literal();
        continue;
      }
      op(balance);
    }
  }

  bool end_tag(bool block) {
    if (block) {
      if (starts(pos_, "+%}")) return finish_tag(pos_ + 3, Tok::BlockEnd);
      if (starts(pos_, "-%}")) return finish_tag(skip_ws(pos_ + 3), Tok::BlockEnd);
      if (starts(pos_, "%}")) {
        size_t e = pos_ + 2;
        if (e < s_.size() && s_[e] == '\n') ++e;  // trim_blocks
        return finish_tag(e, Tok::BlockEnd);
      }
      return false;
    }
    if (starts(pos_, "-}}")) return finish_tag(skip_ws(pos_ + 3), Tok::VarEnd);
    if (starts(pos_, "}}")) return finish_tag(pos_ + 2, Tok::VarEnd);
    return false;
  }
  bool finish_tag(size_t end, Tok t) {
    push(t, "");
    advance_to(end);
    line_starting_ = s_[end - 1] == '\n';
    return true;
  }

  void number() {
    size_t p = pos_;
    auto is_digit = [&](size_t q) { return q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q])); };
    auto digits = [&](size_t q) {  // (\d+_)*\d+, starting at a digit
      while (is_digit(q) || (s_[q] == '_' && is_digit(q + 1))) ++q;
      return q;
    };
    std::string clean;
    size_t e = digits(p);
    bool is_float = false;
    if (e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      e = digits(e + 1);
      is_float = true;
    }
    if (e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      size_t q = e + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) {
        e = digits(q);
        is_float = true;
      }
    }
    for (size_t i = p; i < e; ++i)
      if (s_[i] != '_') clean += s_[i];
    Token tok;
    tok.line = line_;
    tok.text = clean;
    if (is_float) {
      tok.type = Tok::Float;
      tok.fval = std::strtod(clean.c_str(), nullptr);
    } else {
      tok.type = Tok::Integer;
      errno = 0;
      char* endp = nullptr;
      long long v = std::strtoll(clean.c_str(), &endp, 10);
      if (errno == ERANGE) syntax_error(line_, fmt::format("integer literal {} is too large", clean));
      tok.ival = v;
    }
    out_.push_back(std::move(tok));
    advance_to(e);
  }

  void string_literal() {
    char quote = s_[pos_];
    int open_line = line_;
    std::string val;
    size_t p = pos_ + 1;
    for (;;) {
      if (p >= s_.size()) syntax_error(open_line, "unterminated string literal");
      char c = s_[p];
      if (c == quote) break;
      if (c != '\\') {
        val += c;
        ++p;
        continue;
      }
      if (p + 1 >= s_.size()) syntax_error(open_line, "unterminated string literal");
      char e = s_[p + 1];
      p += 2;
      auto hex = [&](int n) {
        if (p + n > s_.size()) syntax_error(open_line, "truncated \\x/\\u escape in string literal");
        uint32_t v = 0;
        for (int k = 0; k < n; ++k) {
          char h = s_[p + k];
          if (!std::isxdigit(static_cast<unsigned char>(h)))
            syntax_error(open_line, "invalid \\x/\\u escape in string literal");
          v = v * 16 + uint32_t(std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10));
        }
        p += n;
        if (v > 0x10FFFF) syntax_error(open_line, "\\U escape beyond U+10FFFF in string literal");
        utf8_append(val, char32_t(v));
      };
      switch (e) {
        case '\n': break;  // line continuation
        case '\\': val += '\\'; break;
        case '\'': val += '\''; break;
        case '"': val += '"'; break;
        case 'a': val += '\a'; break;
        case 'b': val += '\b'; break;
        case 'f': val += '\f'; break;
        case 'n': val += '\n'; break;
        case 'r': val += '\r'; break;
        case 't': val += '\t'; break;
        case 'v': val += '\v'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            uint32_t v = uint32_t(e - '0');
            for (int k = 0; k < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; ++k) v = v * 8 + uint32_t(s_[p++] - '0');
            utf8_append(val, char32_t(v));
          } else {
            val += '\\';  // unknown escapes stay as written, as in Python
            val += e;
          }
      }
    }
    Token tok;
    tok.type = Tok::String;
    tok.text = std::move(val);
    tok.line = open_line;
    out_.push_back(std::move(tok));
    advance_to(p + 1);
  }

  void op(std::string& balance) {
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* t : kTwo) {
      if (starts(pos_, t)) {
        push(Tok::Op, t);
        advance_to(pos_ + 2);
        return;
      }
    }
    char c = s_[pos_];
    if (!std::strchr("+-*/%~[](){}><=.:|,;", c)) {
      std::string shown = (c & 0x80) ? fmt::format("\\x{:02x}", unsigned(static_cast<unsigned char>(c))) : std::string(1, c);
      syntax_error(line_, fmt::format("unexpected character '{}'", shown));
    }
    if (c == '(') balance += ')';
    else if (c == '[') balance += ']';
    else if (c == '{') balance += '}';
    else if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) syntax_error(line_, fmt::format("unexpected '{}'", c));
      if (balance.back() != c) syntax_error(line_, fmt::format("unexpected '{}', expected '{}'", c, balance.back()));
      balance.pop_back();
    }
    push(Tok::Op, std::string(1, c));
    advance_to(pos_ + 1);
  }
};

}  // namespace

std::vector<Token> lex_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace memra::chat::jinja

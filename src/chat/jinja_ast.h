// Tokens and syntax tree of the Jinja interpreter (internal to src/chat).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja.h"
#include "chat/jinja_value.h"

namespace memra::chat::jinja {

// ---- lexer ----

enum class Tok : uint8_t { Data, VarBegin, VarEnd, BlockBegin, BlockEnd, Name, String, Integer, Float, Op, Eof };

struct Token {
  Tok type = Tok::Eof;
  std::string text;  // Data text, name, decoded string literal, operator
  int line = 1;
  int64_t ival = 0;
  double fval = 0;
};

// Splits a template into tokens, applying newline normalisation, trim_blocks, lstrip_blocks,
// `-`/`+` whitespace control, comments and raw blocks. Throws TemplateError.
std::vector<Token> lex_template(std::string_view source);

[[noreturn]] void syntax_error(int line, const std::string& message);

// ---- syntax tree ----

enum class ExprKind : uint8_t {
  Literal, Name, Attr, Item, Slice, Call, Filter, Test, Neg, Pos, Not, And, Or, Binary, Compare,
  Cond, ListLit, TupleLit, DictLit, Concat,
  BlockValue,  // the rendered body of a filter block / block set, fed to its filter chain
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Arg {
  std::string name;  // empty: positional
  ExprPtr value;
};

struct Expr {
  ExprKind kind = ExprKind::Literal;
  int line = 1;
  int depth = 1;                 // height of this subtree; bounded so evaluation cannot overflow the stack
  Value literal;                 // Literal
  std::string name;              // Name, Attr, Filter/Test name, Binary operator
  std::vector<std::string> ops;  // Compare operators: == != < > <= >= in notin
  bool negated = false;          // Test: `is not`
  // Operands. Attr: [obj]. Item: [obj, key], where key may be a Slice: [start, stop, step]
  // (null = omitted).
  // Call: [callee]. Filter/Test: [input]. Cond: [then, cond, else-or-null]. DictLit: k, v, k, v...
  // Compare: [first, rhs...]. Binary/And/Or/Concat: [lhs, rhs] (Concat: all parts).
  std::vector<ExprPtr> kids;
  std::vector<Arg> args;  // Call / Filter / Test arguments
};

enum class StmtKind : uint8_t { Text, Print, If, For, Set, SetAttr, SetBlock, With, Macro, FilterBlock, Break, Continue };

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Branch {
  ExprPtr cond;  // null for else
  Body body;
};

struct Stmt {
  StmtKind kind = StmtKind::Text;
  int line = 1;
  std::string text;                  // Text; Macro name; SetAttr attribute
  ExprPtr expr;                      // Print / Set / SetAttr value; For iterable; filter chain (SetBlock, FilterBlock)
  std::vector<std::string> targets;  // For / Set / SetBlock names (several: tuple unpacking); SetAttr: {namespace}
  std::vector<Branch> branches;      // If
  ExprPtr cond;                      // For: `if` clause
  bool recursive = false;            // For
  Body body, else_body;              // For / SetBlock / With / Macro / FilterBlock
  std::vector<std::string> params;   // Macro parameters; With: assigned names
  std::vector<ExprPtr> defaults;     // Macro defaults (null = none); With: values
};

struct Program {
  Body body;
};

// Parses a template into a Program. Throws TemplateError with the line of the problem.
std::shared_ptr<Program> parse_template(std::string_view source);

// Bounds on the syntax tree, so that evaluating it recurses a bounded number of times.
constexpr int kMaxExprDepth = 200;
constexpr int kMaxBlockNesting = 64;

}  // namespace memra::chat::jinja

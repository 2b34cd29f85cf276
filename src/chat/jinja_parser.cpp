// Jinja parser: tokens -> syntax tree, following Jinja 3's grammar and operator precedence
// (lowest first): `x if c else y`, or, and, not, comparisons (== != < > <= >= in, not in),
// + -, ~, * / // %, **, unary - +, then postfix (.attr, [key], [a:b:c], calls), filters (|f)
// and tests (is t).
#include <algorithm>
#include <initializer_list>

#include <fmt/format.h>

#include "chat/jinja_ast.h"

namespace memra::chat::jinja {

namespace {

bool one_of(std::string_view s, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : t_(std::move(toks)) {}

  std::shared_ptr<Program> run() {
    auto prog = std::make_shared<Program>();
    prog->body = parse_body({});
    if (cur().type != Tok::Eof) {
      // parse_body({}) only stops early at a tag no open block expects.
      std::string name = cur().text;
      syntax_error(cur().line, fmt::format("unexpected '{}' (no open block expects it)", name));
    }
    return prog;
  }

 private:
  struct Open {
    std::string tag;
    int line;
    std::string expects;
  };

  std::vector<Token> t_;
  size_t i_ = 0;
  int expr_recursion_ = 0;
  int loop_depth_ = 0;
  std::vector<Open> open_;

  // ---- token helpers ----
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().type == Tok::Op && cur().text == op; }
  bool is_name(std::string_view n) const { return cur().type == Tok::Name && cur().text == n; }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::Name: return fmt::format("'{}'", t.text);
      case Tok::Op: return fmt::format("'{}'", t.text);
      case Tok::String: return "a string literal";
      case Tok::Integer:
      case Tok::Float: return fmt::format("number {}", t.text);
      case Tok::VarEnd: return "end of print statement '}}'";
      case Tok::BlockEnd: return "end of statement '%}'";
      case Tok::Eof: return "end of template";
      default: return "template text";
    }
  }
  [[noreturn]] void unexpected(const std::string& expected) {
    syntax_error(cur().line, fmt::format("expected {}, got {}", expected, describe(cur())));
  }
  void expect_op(std::string_view op) {
    if (!is_op(op)) unexpected(fmt::format("'{}'", op));
    next();
  }
  std::string expect_name() {
    if (cur().type != Tok::Name) unexpected("a name");
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Tok::BlockEnd) unexpected("end of statement '%}'");
    next();
  }

  // ---- node helpers ----
  static ExprPtr mk(ExprKind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  // Computes the subtree height; a tree too tall to evaluate safely is a syntax error.
  static ExprPtr seal(ExprPtr e) {
    int d = 0;
    for (auto& k : e->kids)
      if (k) d = std::max(d, k->depth);
    for (auto& a : e->args) d = std::max(d, a.value->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth)
      syntax_error(e->line, fmt::format("expression nested more than {} levels deep", kMaxExprDepth));
    return e;
  }
  static ExprPtr binary(ExprKind k, std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = mk(k, line);
    e->name = std::move(op);
    e->kids.push_back(std::move(l));
    e->kids.push_back(std::move(r));
    return seal(std::move(e));
  }
  struct RecursionGuard {
    Parser& p;
    explicit RecursionGuard(Parser& parser) : p(parser) {
      if (++p.expr_recursion_ > kMaxExprDepth)
        syntax_error(p.cur().line, fmt::format("expression nested more than {} levels deep", kMaxExprDepth));
    }
    ~RecursionGuard() { --p.expr_recursion_; }
  };

  // ---- statements ----

  // Parses until `{% <one of ends> ...`; returns with cur() at that name (the `{%` consumed).
  Body parse_body(std::initializer_list<std::string_view> ends) {
    Body body;
    for (;;) {
      const Token& t = cur();
      if (t.type == Tok::Eof) {
        if (ends.size() == 0) return body;
        const Open& o = open_.back();
        syntax_error(t.line, fmt::format("unexpected end of template: '{}' opened at line {} was never closed (expected '{}')",
                                         o.tag, o.line, o.expects));
      }
      if (t.type == Tok::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Text;
        s->line = t.line;
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Tok::VarBegin) {
        next();
        auto s = std::make_unique<Stmt>();
        s->kind = StmtKind::Print;
        s->line = cur().line;
        s->expr = parse_tuple(true, false);
        if (cur().type != Tok::VarEnd) unexpected("end of print statement '}}'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::BlockBegin) {
        next();
        if (cur().type != Tok::Name) unexpected("a statement name");
        if (one_of(cur().text, ends)) return body;
        parse_statement(body, ends.size() == 0);
      } else {
        syntax_error(t.line, fmt::format("unexpected {}", describe(t)));
      }
    }
  }

  void open_block(const std::string& tag, int line, const std::string& expects) {
    if (int(open_.size()) >= kMaxBlockNesting)
      syntax_error(line, fmt::format("blocks nested more than {} levels deep", kMaxBlockNesting));
    open_.push_back({tag, line, expects});
  }
  void close_block() { open_.pop_back(); }

  StmtPtr new_stmt(StmtKind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  void parse_statement(Body& out, bool top_level) {
    const std::string name = cur().text;
    const int line = cur().line;
    if (name == "if") {
      next();
      out.push_back(parse_if(line));
    } else if (name == "for") {
      next();
      out.push_back(parse_for(line));
    } else if (name == "set") {
      next();
      out.push_back(parse_set(line));
    } else if (name == "macro") {
      next();
      out.push_back(parse_macro(line));
    } else if (name == "with") {
      next();
      out.push_back(parse_with(line));
    } else if (name == "filter") {
      next();
      auto s = new_stmt(StmtKind::FilterBlock, line);
      s->expr = parse_filter_chain(mk(ExprKind::BlockValue, line), true);
      expect_block_end();
      s->body = parse_block_body("filter", line, "endfilter");
      out.push_back(std::move(s));
    } else if (name == "generation") {
      // transformers' {% generation %} marks assistant tokens for training masks; the text is
      // rendered unchanged.
      next();
      expect_block_end();
      Body inner = parse_block_body("generation", line, "endgeneration");
      for (auto& s : inner) out.push_back(std::move(s));
    } else if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) syntax_error(line, fmt::format("'{}' outside of a for loop", name));
      next();
      expect_block_end();
      out.push_back(new_stmt(name == "break" ? StmtKind::Break : StmtKind::Continue, line));
    } else if (one_of(name, {"call", "include", "import", "from", "extends", "block", "autoescape", "do"})) {
      syntax_error(line, fmt::format("the '{}' tag is not supported in chat templates", name));
    } else if (one_of(name, {"endif", "endfor", "endset", "endmacro", "endwith", "endfilter", "endgeneration",
                             "elif", "else", "endraw"})) {
      std::string msg = fmt::format("unexpected '{}'", name);
      if (!top_level && !open_.empty())
        msg += fmt::format("; the innermost open block is '{}' (line {}), which expects '{}'", open_.back().tag,
                           open_.back().line, open_.back().expects);
      syntax_error(line, msg);
    } else {
      syntax_error(line, fmt::format("unknown tag '{}'", name));
    }
  }

  // Body of a simple block up to its `{% end... %}`, consumed. Bodies that are rendered into a
  // value (macro, block set, filter) cannot break out of an enclosing loop.
  Body parse_block_body(const std::string& tag, int line, const std::string& end) {
    open_block(tag, line, end);
    int saved_loops = loop_depth_;
    if (tag == "macro" || tag == "set" || tag == "filter") loop_depth_ = 0;
    Body b = parse_body({end});
    loop_depth_ = saved_loops;
    next();  // the end name
    expect_block_end();
    close_block();
    return b;
  }

  StmtPtr parse_if(int line) {
    auto s = new_stmt(StmtKind::If, line);
    ExprPtr cond = parse_tuple(true, false);
    expect_block_end();
    open_block("if", line, "endif");
    for (;;) {
      Body body = parse_body({"elif", "else", "endif"});
      s->branches.push_back({std::move(cond), std::move(body)});
      std::string tag = cur().text;
      next();
      if (tag == "elif") {
        cond = parse_tuple(true, false);
        expect_block_end();
        continue;
      }
      if (tag == "else") {
        expect_block_end();
        Body els = parse_body({"endif"});
        next();
        expect_block_end();
        s->branches.push_back({nullptr, std::move(els)});
        break;
      }
      expect_block_end();  // endif
      break;
    }
    close_block();
    return s;
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = is_op("(");
    if (paren) next();
    names.push_back(expect_name());
    while (is_op(",")) {
      next();
      if (paren && is_op(")")) break;
      if (cur().type != Tok::Name) break;  // trailing comma
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(int line) {
    auto s = new_stmt(StmtKind::For, line);
    s->targets = parse_targets();
    if (!is_name("in")) unexpected("'in'");
    next();
    s->expr = parse_tuple(false, false, {"recursive"});
    if (is_name("if")) {
      next();
      s->cond = parse_expression(true);
    }
    if (is_name("recursive")) {
      next();
      s->recursive = true;
    }
    expect_block_end();
    open_block("for", line, "endfor");
    ++loop_depth_;
    s->body = parse_body({"else", "endfor"});
    --loop_depth_;
    if (cur().text == "else") {
      next();
      expect_block_end();
      s->else_body = parse_body({"endfor"});
    }
    next();
    expect_block_end();
    close_block();
    return s;
  }

  StmtPtr parse_set(int line) {
    if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == ".") {
      auto s = new_stmt(StmtKind::SetAttr, line);
      s->targets.push_back(expect_name());
      next();  // '.'
      s->text = expect_name();
      expect_op("=");
      s->expr = parse_tuple(true, false);
      expect_block_end();
      return s;
    }
    std::vector<std::string> names = parse_targets();
    if (is_op("=")) {
      next();
      auto s = new_stmt(StmtKind::Set, line);
      s->targets = std::move(names);
      s->expr = parse_tuple(true, false);
      expect_block_end();
      return s;
    }
    if (names.size() != 1) syntax_error(line, "a block set assigns exactly one name");
    auto s = new_stmt(StmtKind::SetBlock, line);
    s->targets = std::move(names);
    if (is_op("|")) {
      next();
      s->expr = parse_filter_chain(mk(ExprKind::BlockValue, line), true);
    }
    expect_block_end();
    s->body = parse_block_body("set", line, "endset");
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = new_stmt(StmtKind::With, line);
    while (cur().type != Tok::BlockEnd) {
      if (!s->params.empty()) expect_op(",");
      s->params.push_back(expect_name());
      expect_op("=");
      s->defaults.push_back(parse_expression(true));
    }
    expect_block_end();
    s->body = parse_block_body("with", line, "endwith");
    return s;
  }

  StmtPtr parse_macro(int line) {
    auto s = new_stmt(StmtKind::Macro, line);
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      std::string p = expect_name();
      if (std::find(s->params.begin(), s->params.end(), p) != s->params.end())
        syntax_error(line, fmt::format("macro '{}' has two parameters named '{}'", s->text, p));
      s->params.push_back(p);
      if (is_op("=")) {
        next();
        s->defaults.push_back(parse_expression(true));
      } else {
        if (!s->defaults.empty() && s->defaults.back())
          syntax_error(line, fmt::format("macro '{}': parameter '{}' without a default follows one with a default",
                                         s->text, p));
        s->defaults.push_back(nullptr);
      }
    }
    next();
    expect_block_end();
    s->body = parse_block_body("macro", line, "endmacro");
    return s;
  }

  // ---- expressions ----

  bool is_tuple_end(std::initializer_list<std::string_view> extra) const {
    const Token& t = cur();
    if (t.type == Tok::VarEnd || t.type == Tok::BlockEnd || t.type == Tok::Eof) return true;
    if (t.type == Tok::Op && t.text == ")") return true;
    return t.type == Tok::Name && one_of(t.text, extra);
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, std::initializer_list<std::string_view> extra = {}) {
    int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    for (;;) {
      if (!items.empty()) expect_op(",");
      if (is_tuple_end(extra)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) unexpected("an expression");
    }
    auto e = mk(ExprKind::TupleLit, line);
    e->kids = std::move(items);
    return seal(std::move(e));
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    RecursionGuard g(*this);
    int line = cur().line;
    ExprPtr expr = parse_or();
    while (is_name("if")) {
      next();
      auto e = mk(ExprKind::Cond, line);
      ExprPtr cond = parse_or();
      ExprPtr els;
      if (is_name("else")) {
        next();
        els = parse_condexpr();
      }
      e->kids.push_back(std::move(expr));
      e->kids.push_back(std::move(cond));
      e->kids.push_back(std::move(els));
      expr = seal(std::move(e));
      line = cur().line;
    }
    return expr;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      int line = cur().line;
      next();
      l = binary(ExprKind::Or, "or", std::move(l), parse_and(), line);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      int line = cur().line;
      next();
      l = binary(ExprKind::And, "and", std::move(l), parse_not(), line);
    }
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      RecursionGuard g(*this);
      auto e = mk(ExprKind::Not, cur().line);
      next();
      e->kids.push_back(parse_not());
      return seal(std::move(e));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = cur().line;
    ExprPtr first = parse_math1();
    auto e = mk(ExprKind::Compare, line);
    for (;;) {
      if (cur().type == Tok::Op && one_of(cur().text, {"==", "!=", "<", ">", "<=", ">="})) {
        e->ops.push_back(cur().text);
        next();
      } else if (is_name("in")) {
        e->ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == Tok::Name && peek().text == "in") {
        e->ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      if (e->kids.empty()) e->kids.push_back(std::move(first));
      e->kids.push_back(parse_math1());
    }
    if (e->ops.empty()) return first;
    return seal(std::move(e));
  }

  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      l = binary(ExprKind::Binary, op, std::move(l), parse_concat(), line);
    }
    return l;
  }
  ExprPtr parse_concat() {
    int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = mk(ExprKind::Concat, line);
    e->kids.push_back(std::move(first));
    while (is_op("~")) {
      next();
      e->kids.push_back(parse_math2());
    }
    return seal(std::move(e));
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      int line = cur().line;
      next();
      l = binary(ExprKind::Binary, op, std::move(l), parse_pow(), line);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      int line = cur().line;
      next();
      l = binary(ExprKind::Binary, "**", std::move(l), parse_unary(true), line);
    }
    return l;
  }

  ExprPtr parse_unary(bool with_filter) {
    RecursionGuard g(*this);
    int line = cur().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      auto e = mk(is_op("-") ? ExprKind::Neg : ExprKind::Pos, line);
      next();
      e->kids.push_back(parse_unary(false));
      node = seal(std::move(e));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    int line = t.line;
    if (t.type == Tok::Name) {
      auto e = mk(ExprKind::Literal, line);
      if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->literal = Value::none();
      else {
        e->kind = ExprKind::Name;
        e->name = t.text;
      }
      next();
      return seal(std::move(e));
    }
    if (t.type == Tok::String) {
      std::string s;
      while (cur().type == Tok::String) {
        s += cur().text;
        next();
      }
      auto e = mk(ExprKind::Literal, line);
      e->literal = Value::string(std::move(s));
      return seal(std::move(e));
    }
    if (t.type == Tok::Integer || t.type == Tok::Float) {
      auto e = mk(ExprKind::Literal, line);
      e->literal = t.type == Tok::Integer ? Value::integer(t.ival) : Value::floating(t.fval);
      next();
      return seal(std::move(e));
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = mk(ExprKind::ListLit, line);
      while (!is_op("]")) {
        if (!e->kids.empty()) expect_op(",");
        if (is_op("]")) break;
        e->kids.push_back(parse_expression(true));
      }
      next();
      return seal(std::move(e));
    }
    if (is_op("{")) {
      next();
      auto e = mk(ExprKind::DictLit, line);
      while (!is_op("}")) {
        if (!e->kids.empty()) expect_op(",");
        if (is_op("}")) break;
        e->kids.push_back(parse_expression(true));
        expect_op(":");
        e->kids.push_back(parse_expression(true));
      }
      next();
      return seal(std::move(e));
    }
    unexpected("an expression");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    for (;;) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    for (;;) {
      if (is_op("|")) {
        next();
        node = parse_filter_chain(std::move(node), false);
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    int line = cur().line;
    if (is_op(".")) {
      next();
      if (cur().type == Tok::Integer) {
        auto key = mk(ExprKind::Literal, line);
        key->literal = Value::integer(cur().ival);
        next();
        auto e = mk(ExprKind::Item, line);
        e->kids.push_back(std::move(node));
        e->kids.push_back(seal(std::move(key)));
        return seal(std::move(e));
      }
      auto e = mk(ExprKind::Attr, line);
      e->name = expect_name();
      e->kids.push_back(std::move(node));
      return seal(std::move(e));
    }
    next();  // '['
    std::vector<ExprPtr> keys;
    while (!is_op("]")) {
      if (!keys.empty()) expect_op(",");
      if (is_op("]")) break;
      keys.push_back(parse_subscribed());
    }
    next();
    if (keys.empty()) syntax_error(line, "empty subscript []");
    auto e = mk(ExprKind::Item, line);
    e->kids.push_back(std::move(node));
    if (keys.size() == 1) {
      e->kids.push_back(std::move(keys[0]));
    } else {
      auto tup = mk(ExprKind::TupleLit, line);
      tup->kids = std::move(keys);
      e->kids.push_back(seal(std::move(tup)));
    }
    return seal(std::move(e));
  }

  // One subscript: an expression or a slice `start:stop:step` (each part optional).
  ExprPtr parse_subscribed() {
    int line = cur().line;
    ExprPtr start;
    if (!is_op(":")) {
      start = parse_expression(true);
      if (!is_op(":")) return start;
    }
    next();  // ':'
    auto e = mk(ExprKind::Slice, line);
    e->kids.push_back(std::move(start));
    e->kids.push_back((is_op("]") || is_op(",") || is_op(":")) ? nullptr : parse_expression(true));
    if (is_op(":")) {
      next();
      e->kids.push_back((is_op("]") || is_op(",")) ? nullptr : parse_expression(true));
    } else {
      e->kids.push_back(nullptr);
    }
    return seal(std::move(e));
  }

  void parse_call_args(std::vector<Arg>& args) {
    expect_op("(");
    bool seen_kw = false;
    while (!is_op(")")) {
      if (!args.empty()) expect_op(",");
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) syntax_error(cur().line, "*args and **kwargs in calls are not supported");
      if (cur().type == Tok::Name && peek().type == Tok::Op && peek().text == "=") {
        std::string n = cur().text;
        next();
        next();
        args.push_back({n, parse_expression(true)});
        seen_kw = true;
      } else {
        if (seen_kw) syntax_error(cur().line, "positional argument follows keyword argument");
        args.push_back({"", parse_expression(true)});
      }
    }
    next();
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = mk(ExprKind::Call, cur().line);
    e->kids.push_back(std::move(node));
    parse_call_args(e->args);
    return seal(std::move(e));
  }

  std::string dotted_name() {
    std::string n = expect_name();
    while (is_op(".") && peek().type == Tok::Name) {
      next();
      n += "." + expect_name();
    }
    return n;
  }

  // `name(args) | name2 ...` applied to `node`; the leading '|' is already consumed.
  ExprPtr parse_filter_chain(ExprPtr node, bool whole_chain) {
    for (;;) {
      auto e = mk(ExprKind::Filter, cur().line);
      e->name = dotted_name();
      if (is_op("(")) parse_call_args(e->args);
      e->kids.push_back(std::move(node));
      node = seal(std::move(e));
      if (!whole_chain || !is_op("|")) return node;
      next();
    }
  }

  ExprPtr parse_test(ExprPtr node) {
    auto e = mk(ExprKind::Test, cur().line);
    next();  // 'is'
    if (is_name("not")) {
      next();
      e->negated = true;
    }
    e->name = dotted_name();
    if (is_op("(")) {
      parse_call_args(e->args);
    } else {
      const Token& t = cur();
      bool starts_primary = t.type == Tok::Name || t.type == Tok::String || t.type == Tok::Integer ||
                            t.type == Tok::Float || (t.type == Tok::Op && (t.text == "[" || t.text == "{"));
      if (starts_primary && !(t.type == Tok::Name && one_of(t.text, {"else", "or", "and"}))) {
        if (is_name("is")) syntax_error(t.line, "tests cannot be chained with 'is'");
        ExprPtr arg = parse_postfix(parse_primary());
        e->args.push_back({"", std::move(arg)});
      }
    }
    e->kids.push_back(std::move(node));
    return seal(std::move(e));
  }
};

}  // namespace

std::shared_ptr<Program> parse_template(std::string_view source) { return Parser(lex_template(source)).run(); }

}  // namespace memra::chat::jinja

// The Jinja evaluator: statements, expressions, scopes and macros (see jinja_interp.h).
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>

#include "chat/jinja_interp.h"
#include "chat/jinja_pystr.h"

namespace memra::chat::jinja {

namespace {
// Nested exec/eval calls (each a C++ stack frame). Expression trees are at most kMaxExprDepth
// tall and blocks kMaxBlockNesting deep, so only macro recursion can approach this.
constexpr int kMaxRecursion = 1500;

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

[[noreturn]] void use_undefined(const Value& v) { eval_fail(v.undefined_hint()); }

std::string attr_hint(const Value& obj, const std::string& name) {
  if (obj.is_none()) return fmt::format("'None' has no attribute '{}'", name);
  return fmt::format("'{} object' has no attribute '{}'", type_name(obj), name);
}
}  // namespace

// ---- RAII helpers ----

struct Interp::Scope {
  Interp& in;
  Frame frame;
  Frame* saved;
  Scope(Interp& interp, Frame* parent) : in(interp), saved(interp.frame_) {
    frame.parent = parent;
    frame.level = in.stack_.size();
    frame.serial = in.next_serial_++;
    in.stack_.push_back(&frame);
    in.frame_ = &frame;
  }
  ~Scope() {
    in.stack_.pop_back();
    in.frame_ = saved;
  }
};

struct Interp::Capture {
  Interp& in;
  std::string buf;
  std::string* saved;
  explicit Capture(Interp& interp) : in(interp), saved(interp.out_) { in.out_ = &buf; }
  ~Capture() { in.out_ = saved; }
};

struct Interp::RecursionGuard {
  Interp& in;
  explicit RecursionGuard(Interp& interp) : in(interp) {
    if (++in.recursion_ > kMaxRecursion) in.fail("template recursion too deep (a macro calling itself without end?)");
  }
  ~RecursionGuard() { --in.recursion_; }
};

// ---- basics ----

void Interp::fail(const std::string& message) const { eval_fail(message); }

Interp::~Interp() {
  for (Value& ns : namespaces_) ns.as_ns().clear();
}

Value Interp::new_namespace(DictObj attrs) {
  Value v = Value::ns(std::move(attrs));
  namespaces_.push_back(v);
  return v;
}

void Interp::charge(uint64_t units) {
  work_ += units;
  if (work_ > limits_.max_work)
    fail(fmt::format("template exceeded its work limit ({} steps); it may loop without end", limits_.max_work));
}

void Interp::check_string_size(size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    fail(fmt::format("a string would grow past {} bytes (the output limit)", limits_.max_output_bytes));
}

void Interp::check_list_size(size_t items) const {
  if (items > limits_.max_list_items) fail(fmt::format("a list would grow past {} elements", limits_.max_list_items));
}

void Interp::write(std::string_view s) {
  if (out_->size() + s.size() > limits_.max_output_bytes)
    fail(fmt::format("rendered text exceeds {} bytes", limits_.max_output_bytes));
  charge_bytes(s.size());
  out_->append(s);
}

Value Interp::lookup(const std::string& name) {
  for (Frame* f = frame_; f; f = f->parent)
    for (auto it = f->vars.rbegin(); it != f->vars.rend(); ++it)
      if (it->first == name) return it->second;
  Value g = global(name);
  if (!g.is_undefined()) return g;
  return Value::undefined(fmt::format("'{}' is undefined", name));
}

void Interp::assign(const std::string& name, Value v) {
  for (auto& kv : frame_->vars) {
    if (kv.first == name) {
      kv.second = std::move(v);
      return;
    }
  }
  frame_->vars.emplace_back(name, std::move(v));
}

void Interp::unpack(const std::vector<std::string>& targets, const Value& v) {
  std::vector<Value> parts;
  if (v.is_list()) parts = v.as_list().items;
  else if (v.is_string()) parts = iterate(v);
  else fail(fmt::format("cannot unpack a value of type '{}' into {} names", type_name(v), targets.size()));
  if (parts.size() != targets.size())
    fail(fmt::format("cannot unpack {} values into {} names", parts.size(), targets.size()));
  for (size_t i = 0; i < targets.size(); ++i) assign(targets[i], parts[i]);
}

std::vector<Value> Interp::iterate(const Value& v) {
  std::vector<Value> out;
  switch (v.kind()) {
    case Value::Kind::Undefined: return out;
    case Value::Kind::List:
      charge_elements(v.as_list().items.size());
      return v.as_list().items;
    case Value::Kind::Dict:
      charge_elements(v.as_dict().size());
      for (auto& kv : v.as_dict().items()) out.push_back(Value::string(kv.first));
      return out;
    case Value::Kind::String: {
      const std::string& s = v.as_str();
      charge_elements(s.size());
      for (size_t i = 0; i < s.size();) {
        size_t start = i;
        utf8_next(s, i);
        out.push_back(Value::string(s.substr(start, i - start)));
      }
      return out;
    }
    default: fail(fmt::format("'{}' object is not iterable", type_name(v)));
  }
}

// ---- statements ----

void Interp::run(const Body& body, std::vector<std::pair<std::string, Value>> vars, std::string& out) {
  Scope root(*this, nullptr);
  root.frame.vars = std::move(vars);
  out_ = &out;
  exec(body);
}

Interp::Flow Interp::exec(const Body& body) {
  for (auto& s : body) {
    Flow f = exec_stmt(*s);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interp::Flow Interp::exec_stmt(const Stmt& s) {
  RecursionGuard guard(*this);
  line_ = s.line;
  charge(1);
  switch (s.kind) {
    case StmtKind::Text: write(s.text); break;
    case StmtKind::Print: {
      Value v = eval(*s.expr);
      if (v.is_string()) write(v.as_str());
      else write(to_str(v));
      break;
    }
    case StmtKind::If:
      for (auto& b : s.branches)
        if (!b.cond || truthy(eval(*b.cond))) return exec(b.body);
      break;
    case StmtKind::For: {
      Value iterable = eval(*s.expr);
      exec_for(s, iterable, 0, frame_);
      break;
    }
    case StmtKind::Set: {
      Value v = eval(*s.expr);
      if (s.targets.size() == 1) assign(s.targets[0], std::move(v));
      else unpack(s.targets, v);
      break;
    }
    case StmtKind::SetAttr: {
      Value v = eval(*s.expr);
      line_ = s.line;
      Value target = lookup(s.targets[0]);
      if (target.kind() != Value::Kind::Namespace)
        fail(fmt::format("cannot set attribute '{}' on '{}' ({}): only namespace() objects can be modified",
                         s.text, s.targets[0], target.is_undefined() ? "undefined" : type_name(target)));
      target.as_ns().set(s.text, std::move(v));
      break;
    }
    case StmtKind::SetBlock: {
      std::string text = render_block(s.body, true);
      Value v = s.expr ? apply_block_filters(s.expr.get(), std::move(text)) : Value::string(std::move(text));
      assign(s.targets[0], std::move(v));
      break;
    }
    case StmtKind::With: {
      std::vector<Value> vals;
      for (auto& d : s.defaults) vals.push_back(eval(*d));
      Scope scope(*this, frame_);
      for (size_t i = 0; i < vals.size(); ++i) assign(s.params[i], std::move(vals[i]));
      return exec(s.body);
    }
    case StmtKind::Macro: define_macro(s); break;
    case StmtKind::FilterBlock: {
      std::string text = render_block(s.body, false);
      Value v = apply_block_filters(s.expr.get(), std::move(text));
      write(to_str(v));
      break;
    }
    case StmtKind::Break: return Flow::Break;
    case StmtKind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

void Interp::exec_for(const Stmt& s, const Value& iterable, int depth0, Frame* home) {
  std::vector<Value> items = iterate(iterable);
  if (s.cond) {
    std::vector<Value> kept;
    for (auto& item : items) {
      charge(1);
      Scope scope(*this, home);
      if (s.targets.size() == 1) assign(s.targets[0], item);
      else unpack(s.targets, item);
      if (truthy(eval(*s.cond))) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    if (!s.else_body.empty()) {
      Scope scope(*this, home);
      exec(s.else_body);
    }
    return;
  }
  auto loop = std::make_shared<LoopObj>();
  loop->items = std::make_shared<const std::vector<Value>>(std::move(items));
  loop->depth0 = depth0;
  loop->stmt = &s;
  loop->home = home;
  loop->home_level = home->level;
  loop->home_serial = home->serial;
  Value loop_value = Value::loop(loop);
  const auto& list = *loop->items;
  for (size_t i = 0; i < list.size(); ++i) {
    charge(1);
    loop->index0 = i;
    Scope scope(*this, home);
    if (s.targets.size() == 1) assign(s.targets[0], list[i]);
    else unpack(s.targets, list[i]);
    assign("loop", loop_value);
    if (exec(s.body) == Flow::Break) break;
  }
}

void Interp::define_macro(const Stmt& s) {
  Frame* home = frame_;
  size_t level = home->level;
  uint64_t serial = home->serial;
  const Stmt* m = &s;
  assign(s.text, Value::function(s.text, [m, home, level, serial](Interp& in, CallArgs& args) {
           if (level >= in.stack_.size() || in.stack_[level] != home || home->serial != serial)
             in.fail(fmt::format("macro '{}' was called after the scope that defined it ended", m->text));
           return in.call_macro(*m, home, serial, args);
         }));
}

Value Interp::call_macro(const Stmt& m, Frame* home, uint64_t, CallArgs& args) {
  if (call_depth_ >= limits_.max_call_depth)
    fail(fmt::format("macro calls nested more than {} deep (a macro calling itself without end?)",
                     limits_.max_call_depth));
  int saved_line = line_;
  ++call_depth_;
  Capture cap(*this);
  {
    Scope scope(*this, home);
    size_t np = m.params.size();
    if (args.pos.size() > np)
      fail(fmt::format("macro '{}' takes at most {} argument(s), got {}", m.text, np, args.pos.size()));
    std::vector<bool> given(np, false);
    for (size_t i = 0; i < args.pos.size(); ++i) {
      assign(m.params[i], args.pos[i]);
      given[i] = true;
    }
    for (auto& [k, v] : args.kw) {
      size_t idx = 0;
      while (idx < np && m.params[idx] != k) ++idx;
      if (idx == np) fail(fmt::format("macro '{}' has no parameter named '{}'", m.text, k));
      if (given[idx]) fail(fmt::format("macro '{}' got two values for parameter '{}'", m.text, k));
      assign(k, v);
      given[idx] = true;
    }
    for (size_t i = 0; i < np; ++i) {
      if (given[i]) continue;
      if (m.defaults[i]) assign(m.params[i], eval(*m.defaults[i]));
      else assign(m.params[i], Value::undefined(fmt::format("parameter '{}' of macro '{}' was not provided", m.params[i], m.text)));
    }
    exec(m.body);
  }
  --call_depth_;
  line_ = saved_line;
  return Value::string(std::move(cap.buf));
}

std::string Interp::render_block(const Body& body, bool own_scope) {
  Capture cap(*this);
  if (own_scope) {
    Scope scope(*this, frame_);
    exec(body);
  } else {
    exec(body);
  }
  return std::move(cap.buf);
}

Value Interp::apply_block_filters(const Expr* chain, std::string text) {
  Value v = Value::string(std::move(text));
  const Value* saved = block_value_;
  block_value_ = &v;
  Value r = eval(*chain);
  block_value_ = saved;
  return r;
}

// ---- expressions ----

CallArgs Interp::eval_args(const std::vector<Arg>& args) {
  CallArgs out;
  for (auto& a : args) {
    if (a.name.empty()) out.pos.push_back(eval(*a.value));
    else out.kw.emplace_back(a.name, eval(*a.value));
  }
  return out;
}

Value Interp::eval(const Expr& e) {
  RecursionGuard guard(*this);
  line_ = e.line;
  charge(1);
  switch (e.kind) {
    case ExprKind::Literal: return e.literal;
    case ExprKind::Name: return lookup(e.name);
    case ExprKind::Attr: return get_attr(eval(*e.kids[0]), e.name);
    case ExprKind::Item: {
      Value obj = eval(*e.kids[0]);
      if (e.kids[1]->kind == ExprKind::Slice) return eval_slice(obj, *e.kids[1]);
      return get_item(obj, eval(*e.kids[1]));
    }
    case ExprKind::Slice: fail("a slice can only be used inside [ ]");
    case ExprKind::Call: return eval_call(e);
    case ExprKind::Filter: {
      Value input = eval(*e.kids[0]);
      CallArgs args = eval_args(e.args);
      line_ = e.line;
      return apply_filter(*this, e.name, input, args);
    }
    case ExprKind::Test: {
      Value input = eval(*e.kids[0]);
      CallArgs args = eval_args(e.args);
      line_ = e.line;
      return Value::boolean(apply_test(*this, e.name, input, args) != e.negated);
    }
    case ExprKind::Neg:
    case ExprKind::Pos: {
      Value v = eval(*e.kids[0]);
      if (v.is_undefined()) use_undefined(v);
      bool neg = e.kind == ExprKind::Neg;
      if (v.kind() == Value::Kind::Float) return Value::floating(neg ? -v.as_float() : v.as_float());
      if (v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool) {
        if (!neg) return Value::integer(v.as_int());
        if (v.as_int() == std::numeric_limits<int64_t>::min()) fail("integer overflow");
        return Value::integer(-v.as_int());
      }
      fail(fmt::format("bad operand type for unary {}: '{}'", neg ? '-' : '+', type_name(v)));
    }
    case ExprKind::Not: return Value::boolean(!truthy(eval(*e.kids[0])));
    case ExprKind::And: {
      Value l = eval(*e.kids[0]);
      return truthy(l) ? eval(*e.kids[1]) : l;
    }
    case ExprKind::Or: {
      Value l = eval(*e.kids[0]);
      return truthy(l) ? l : eval(*e.kids[1]);
    }
    case ExprKind::Binary: {
      Value l = eval(*e.kids[0]);
      Value r = eval(*e.kids[1]);
      line_ = e.line;
      return eval_binary(e.name, l, r);
    }
    case ExprKind::Compare: return eval_compare(e);
    case ExprKind::Cond:
      if (truthy(eval(*e.kids[1]))) return eval(*e.kids[0]);
      if (e.kids[2]) return eval(*e.kids[2]);
      return Value::undefined("the conditional expression was false and has no else branch");
    case ExprKind::ListLit:
    case ExprKind::TupleLit: {
      std::vector<Value> items;
      items.reserve(e.kids.size());
      for (auto& k : e.kids) items.push_back(eval(*k));
      charge_elements(items.size());
      return Value::list(std::move(items), e.kind == ExprKind::TupleLit);
    }
    case ExprKind::DictLit: {
      DictObj d;
      for (size_t i = 0; i + 1 < e.kids.size(); i += 2) {
        Value k = eval(*e.kids[i]);
        if (!k.is_string()) fail(fmt::format("dict keys must be strings in chat templates, got '{}'", type_name(k)));
        d.set(k.as_str(), eval(*e.kids[i + 1]));
      }
      charge_elements(d.size());
      return Value::dict(std::move(d));
    }
    case ExprKind::Concat: {
      std::string s;
      for (auto& k : e.kids) {
        Value v = eval(*k);
        if (v.is_string()) s += v.as_str();
        else s += to_str(v);
        check_string_size(s.size());
      }
      charge_bytes(s.size());
      return Value::string(std::move(s));
    }
    case ExprKind::BlockValue: return *block_value_;
  }
  fail("unknown expression");
}

Value Interp::eval_call(const Expr& e) {
  const Expr& callee = *e.kids[0];
  if (callee.kind == ExprKind::Attr) {
    Value obj = eval(*callee.kids[0]);
    if (has_method(obj, callee.name)) {
      CallArgs args = eval_args(e.args);
      line_ = e.line;
      bool found = true;
      return call_method(*this, obj, callee.name, args, found);
    }
    Value fn = get_attr(obj, callee.name);
    CallArgs args = eval_args(e.args);
    line_ = e.line;
    return call_value(fn, args);
  }
  Value fn = eval(callee);
  CallArgs args = eval_args(e.args);
  line_ = e.line;
  return call_value(fn, args);
}

Value Interp::call_value(const Value& callee, CallArgs& args) {
  switch (callee.kind()) {
    case Value::Kind::Function: return callee.as_func().call(*this, args);
    case Value::Kind::Loop: {
      LoopObj& l = callee.as_loop();
      if (!l.stmt->recursive) fail("loop() can only be called inside a for loop marked 'recursive'");
      if (args.pos.size() != 1 || !args.kw.empty()) fail("loop() takes exactly one argument (the items to loop over)");
      if (l.home_level >= stack_.size() || stack_[l.home_level] != l.home || l.home->serial != l.home_serial)
        fail("loop() was called after its for loop ended");
      if (call_depth_ >= limits_.max_call_depth)
        fail(fmt::format("recursive loop nested more than {} deep", limits_.max_call_depth));
      ++call_depth_;
      Capture cap(*this);
      exec_for(*l.stmt, args.pos[0], l.depth0 + 1, l.home);
      --call_depth_;
      return Value::string(std::move(cap.buf));
    }
    case Value::Kind::Undefined: use_undefined(callee);
    default: fail(fmt::format("'{}' object is not callable", type_name(callee)));
  }
}

Value Interp::loop_attr(const Value& loop, const std::string& name) {
  const LoopObj& l = loop.as_loop();
  const auto& items = *l.items;
  size_t n = items.size(), i = l.index0;
  if (name == "index0") return Value::integer(int64_t(i));
  if (name == "index") return Value::integer(int64_t(i + 1));
  if (name == "revindex0") return Value::integer(int64_t(n - i - 1));
  if (name == "revindex") return Value::integer(int64_t(n - i));
  if (name == "first") return Value::boolean(i == 0);
  if (name == "last") return Value::boolean(i + 1 == n);
  if (name == "length") return Value::integer(int64_t(n));
  if (name == "depth0") return Value::integer(l.depth0);
  if (name == "depth") return Value::integer(l.depth0 + 1);
  if (name == "previtem") return i > 0 ? items[i - 1] : Value::undefined("there is no previous item");
  if (name == "nextitem") return i + 1 < n ? items[i + 1] : Value::undefined("there is no next item");
  return Value::undefined(fmt::format("'loop' has no attribute '{}'", name));
}

Value Interp::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: use_undefined(obj);
    case Value::Kind::Dict: {
      if (has_method(obj, name)) break;
      const Value* v = obj.as_dict().find(name);
      return v ? *v : Value::undefined(attr_hint(obj, name));
    }
    case Value::Kind::Namespace: {
      const Value* v = obj.as_dict().find(name);
      return v ? *v : Value::undefined(attr_hint(obj, name));
    }
    case Value::Kind::Loop:
      if (has_method(obj, name)) break;
      return loop_attr(obj, name);
    default:
      if (has_method(obj, name)) break;
      return Value::undefined(attr_hint(obj, name));
  }
  // A method used as a value (e.g. passed around before being called): bind it.
  std::string method = name;
  Value self = obj;
  return Value::function(name, [self, method](Interp& in, CallArgs& args) {
    bool found = true;
    return call_method(in, self, method, args, found);
  });
}

Value Interp::get_item(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::Undefined: use_undefined(obj);
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      if (!key.is_string()) return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), repr(key)));
      const Value* v = obj.as_dict().find(key.as_str());
      return v ? *v : Value::undefined(attr_hint(obj, key.as_str()));
    }
    case Value::Kind::List:
    case Value::Kind::String: {
      if (key.is_string()) return get_attr(obj, key.as_str());
      if (key.kind() != Value::Kind::Int && key.kind() != Value::Kind::Bool)
        return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), repr(key)));
      int64_t idx = key.as_int();
      if (obj.is_list()) {
        auto& items = obj.as_list().items;
        int64_t n = int64_t(items.size());
        int64_t j = idx < 0 ? idx + n : idx;
        if (j < 0 || j >= n) return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), idx));
        return items[size_t(j)];
      }
      const std::string& s = obj.as_str();
      std::vector<size_t> off = utf8_offsets(s);
      int64_t n = int64_t(off.size()) - 1;
      int64_t j = idx < 0 ? idx + n : idx;
      if (j < 0 || j >= n) return Value::undefined(fmt::format("'str object' has no element {}", idx));
      return Value::string(s.substr(off[size_t(j)], off[size_t(j) + 1] - off[size_t(j)]));
    }
    case Value::Kind::Loop:
      if (key.is_string()) return get_attr(obj, key.as_str());
      [[fallthrough]];
    default: return Value::undefined(fmt::format("'{} object' has no element {}", type_name(obj), repr(key)));
  }
}

Value Interp::eval_slice(const Value& obj, const Expr& slice) {
  auto part = [&](size_t k) -> std::optional<int64_t> {
    if (!slice.kids[k]) return std::nullopt;
    Value v = eval(*slice.kids[k]);
    if (v.is_none()) return std::nullopt;
    if (v.kind() != Value::Kind::Int && v.kind() != Value::Kind::Bool)
      fail(fmt::format("slice indices must be integers or none, not '{}'", type_name(v)));
    return v.as_int();
  };
  auto start = part(0), stop = part(1), step_opt = part(2);
  if (obj.is_undefined()) use_undefined(obj);
  int64_t step = step_opt.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  std::vector<size_t> off;
  int64_t n;
  if (obj.is_list()) {
    n = int64_t(obj.as_list().items.size());
  } else if (obj.is_string()) {
    off = utf8_offsets(obj.as_str());
    n = int64_t(off.size()) - 1;
  } else {
    fail(fmt::format("'{}' object cannot be sliced", type_name(obj)));
  }
  // Python's slice.indices().
  auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v;
    if (x < 0) {
      x += n;
      if (x < 0) x = step < 0 ? -1 : 0;
    } else if (x >= n) {
      x = step < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t lo = clamp(start, step < 0 ? n - 1 : 0);
  int64_t hi = clamp(stop, step < 0 ? -1 : n);
  std::vector<size_t> picks;
  for (int64_t i = lo; step > 0 ? i < hi : i > hi; i += step) picks.push_back(size_t(i));
  charge_elements(picks.size());
  if (obj.is_list()) {
    std::vector<Value> items;
    items.reserve(picks.size());
    for (size_t i : picks) items.push_back(obj.as_list().items[i]);
    return Value::list(std::move(items), obj.as_list().tuple);
  }
  std::string out;
  const std::string& s = obj.as_str();
  if (step == 1 && !picks.empty()) out = s.substr(off[picks.front()], off[picks.back() + 1] - off[picks.front()]);
  else
    for (size_t i : picks) out.append(s, off[i], off[i + 1] - off[i]);
  return Value::string(std::move(out));
}

namespace {
bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (!item.is_string())
        eval_fail(fmt::format("'in <string>' requires a string as left operand, not '{}'", type_name(item)));
      return container.as_str().find(item.as_str()) != std::string::npos;
    case Value::Kind::List:
      for (auto& x : container.as_list().items)
        if (equals(x, item)) return true;
      return false;
    case Value::Kind::Dict: return item.is_string() && container.as_dict().find(item.as_str()) != nullptr;
    default: eval_fail(fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }
}
}  // namespace

Value Interp::eval_compare(const Expr& e) {
  Value left = eval(*e.kids[0]);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value right = eval(*e.kids[i + 1]);
    line_ = e.line;
    const std::string& op = e.ops[i];
    bool r;
    if (op == "==") r = equals(left, right);
    else if (op == "!=") r = !equals(left, right);
    else if (op == "in") r = contains(right, left);
    else if (op == "notin") r = !contains(right, left);
    else {
      int c = compare(left, right);
      r = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
    }
    if (!r) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interp::eval_binary(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) use_undefined(a);
  if (b.is_undefined()) use_undefined(b);
  auto unsupported = [&]() -> Value {
    fail(fmt::format("unsupported operand types for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
  };
  const bool ints = (a.kind() == Value::Kind::Int || a.kind() == Value::Kind::Bool) &&
                    (b.kind() == Value::Kind::Int || b.kind() == Value::Kind::Bool);
  const bool nums = a.is_number() && b.is_number();
  char o = op[0];
  if (op == "+") {
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_string_size(a.as_str().size() + b.as_str().size());
      charge_bytes(a.as_str().size() + b.as_str().size());
      // Markup (from |safe) escapes a plain string added to it, as markupsafe does.
      if (a.is_markup() != b.is_markup()) {
        std::string l = a.is_markup() ? a.as_str() : html_escape(a.as_str());
        std::string r = b.is_markup() ? b.as_str() : html_escape(b.as_str());
        return Value::string(l + r, true);
      }
      return Value::string(a.as_str() + b.as_str(), a.is_markup());
    }
    if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
      std::vector<Value> items = a.as_list().items;
      check_list_size(items.size() + b.as_list().items.size());
      charge_elements(items.size() + b.as_list().items.size());
      items.insert(items.end(), b.as_list().items.begin(), b.as_list().items.end());
      return Value::list(std::move(items), a.as_list().tuple);
    }
    return unsupported();
  }
  if (op == "*") {
    if (ints) {
      int64_t r;
      if (__builtin_mul_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    if (nums) return Value::floating(a.as_float() * b.as_float());
    const Value* seq = (a.is_string() || a.is_list()) ? &a : &b;
    const Value* cnt = seq == &a ? &b : &a;
    if ((seq->is_string() || seq->is_list()) && (cnt->kind() == Value::Kind::Int || cnt->kind() == Value::Kind::Bool)) {
      int64_t n = std::max<int64_t>(0, cnt->as_int());
      size_t unit = seq->is_string() ? seq->as_str().size() : seq->as_list().items.size();
      // Checked before multiplying, so that the product cannot overflow.
      if (seq->is_string() && unit != 0 && uint64_t(n) > limits_.max_output_bytes / unit)
        check_string_size(limits_.max_output_bytes + 1);
      if (!seq->is_string() && unit != 0 && uint64_t(n) > limits_.max_list_items / unit)
        check_list_size(limits_.max_list_items + 1);
      size_t total = unit * size_t(n);
      if (seq->is_string()) {
        check_string_size(total);
        charge_bytes(total);
        std::string out;
        out.reserve(total);
        for (int64_t i = 0; i < n; ++i) out += seq->as_str();
        return Value::string(std::move(out));
      }
      check_list_size(total);
      charge_elements(total);
      std::vector<Value> items;
      items.reserve(total);
      for (int64_t i = 0; i < n; ++i)
        items.insert(items.end(), seq->as_list().items.begin(), seq->as_list().items.end());
      return Value::list(std::move(items), seq->as_list().tuple);
    }
    return unsupported();
  }
  if (op == "%" && a.is_string()) return Value::string(percent_format(*this, a.as_str(), b));
  if (!nums) return unsupported();
  if (o == '-') {
    if (ints) {
      int64_t r;
      if (__builtin_sub_overflow(a.as_int(), b.as_int(), &r)) fail("integer overflow");
      return Value::integer(r);
    }
    return Value::floating(a.as_float() - b.as_float());
  }
  if (op == "/") {
    if (b.as_float() == 0) fail("division by zero");
    return Value::floating(a.as_float() / b.as_float());
  }
  if (op == "//" || op == "%") {
    bool mod = op == "%";
    if (ints) {
      int64_t x = a.as_int(), y = b.as_int();
      if (y == 0) fail(mod ? "integer modulo by zero" : "integer division by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1) {
        if (mod) return Value::integer(0);
        fail("integer overflow");
      }
      int64_t q = x / y, r = x % y;
      if (r != 0 && ((r < 0) != (y < 0))) {
        q -= 1;
        r += y;
      }
      return Value::integer(mod ? r : q);
    }
    double x = a.as_float(), y = b.as_float();
    if (y == 0) fail(mod ? "float modulo by zero" : "float division by zero");
    // CPython's float divmod.
    double r = std::fmod(x, y);
    double div = (x - r) / y;
    if (r != 0) {
      if ((y < 0) != (r < 0)) {
        r += y;
        div -= 1.0;
      }
    } else {
      r = std::copysign(0.0, y);
    }
    double fdiv = std::copysign(0.0, x / y);
    if (div != 0) {
      fdiv = std::floor(div);
      if (div - fdiv > 0.5) fdiv += 1.0;
    }
    return Value::floating(mod ? r : fdiv);
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        if (e & 1)
          if (__builtin_mul_overflow(r, base, &r)) fail("integer overflow");
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) fail("integer overflow");
      }
      return Value::integer(r);
    }
    if (a.as_float() == 0 && b.as_float() < 0) fail("zero cannot be raised to a negative power");
    return Value::floating(std::pow(a.as_float(), b.as_float()));
  }
  return unsupported();
}

// ---- Template ----

Template::Template(std::string_view source) : program_(parse_template(source)) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& vars, const Limits& limits) const {
  if (!vars.is_object()) throw TemplateError("chat template variables must be a JSON object");
  std::vector<std::pair<std::string, Value>> root;
  try {
    for (auto it = vars.begin(); it != vars.end(); ++it) root.emplace_back(it.key(), from_json(it.value()));
  } catch (const EvalFailure& f) {
    throw TemplateError(fmt::format("chat template variables: {}", f.message));
  }
  Interp in(limits);
  std::string out;
  try {
    in.run(program_->body, std::move(root), out);
  } catch (const EvalFailure& f) {
    throw TemplateError(fmt::format("chat template error at line {}: {}", in.line(), f.message));
  }
  return out;
}

}  // namespace memra::chat::jinja

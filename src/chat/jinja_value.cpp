// Values of the Jinja interpreter and their Python semantics (see jinja_value.h).
#include "chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "chat/jinja_pystr.h"

namespace memra::chat::jinja {

namespace {
// Bound on nesting for the recursive walks below (repr, ==, tojson, JSON input). Real data is a
// few levels deep; the bound only exists so that hostile input cannot exhaust the stack.
constexpr int kMaxNesting = 256;
constexpr size_t kIndexThreshold = 8;

void check_depth(int depth) {
  if (depth > kMaxNesting) eval_fail(fmt::format("value nested more than {} levels deep", kMaxNesting));
}

// Containers nested in `v` (namespaces are opaque: they are emptied after each render).
uint32_t nesting_of(const Value& v) {
  if (v.is_list()) return v.as_list().depth;
  if (v.is_dict()) return v.as_dict().depth();
  return 0;
}

void check_built_nesting(uint32_t depth) {
  if (depth > kMaxValueNesting) eval_fail(fmt::format("value nested more than {} levels deep", kMaxValueNesting));
}
}  // namespace

void eval_fail(std::string message) { throw EvalFailure{std::move(message)}; }

// ---- DictObj ----

const Value* DictObj::find(std::string_view key) const {
  if (!index_.empty()) {
    auto it = index_.find(std::string(key));
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  for (auto& kv : items_)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void DictObj::set(std::string key, Value value) {
  if (auto* existing = find(key)) {
    *const_cast<Value*>(existing) = std::move(value);
    return;
  }
  depth_ = std::max(depth_, 1 + nesting_of(value));
  items_.emplace_back(std::move(key), std::move(value));
  if (items_.size() > kIndexThreshold) {
    if (index_.empty())
      for (size_t i = 0; i < items_.size(); ++i) index_.emplace(items_[i].first, i);
    else
      index_.emplace(items_.back().first, items_.size() - 1);
  }
}

// ---- Value ----

Value Value::undefined(std::string hint) {
  Value v;
  if (!hint.empty()) v.p_ = std::make_shared<std::string>(std::move(hint));
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::None;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::Int;
  v.i_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::Float;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s, bool markup) {
  Value v;
  v.kind_ = Kind::String;
  v.markup_ = markup;
  v.p_ = std::make_shared<std::string>(std::move(s));
  return v;
}
Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.kind_ = Kind::List;
  uint32_t depth = 1;
  for (auto& x : items) depth = std::max(depth, 1 + nesting_of(x));
  check_built_nesting(depth);
  v.p_ = std::make_shared<ListObj>(ListObj{std::move(items), tuple, depth});
  return v;
}
Value Value::dict(DictObj d) {
  check_built_nesting(d.depth());
  Value v;
  v.kind_ = Kind::Dict;
  v.p_ = std::make_shared<DictObj>(std::move(d));
  return v;
}
Value Value::ns(DictObj d) {
  Value v;
  v.kind_ = Kind::Namespace;
  v.p_ = std::make_shared<DictObj>(std::move(d));
  return v;
}
Value Value::function(std::string name, std::function<Value(Interp&, CallArgs&)> fn) {
  Value v;
  v.kind_ = Kind::Function;
  v.p_ = std::make_shared<FunctionObj>(FunctionObj{std::move(name), std::move(fn)});
  return v;
}
Value Value::loop(std::shared_ptr<LoopObj> l) {
  Value v;
  v.kind_ = Kind::Loop;
  v.p_ = std::move(l);
  return v;
}

double Value::as_float() const {
  switch (kind_) {
    case Kind::Float: return f_;
    case Kind::Int: return double(i_);
    case Kind::Bool: return b_ ? 1.0 : 0.0;
    default: return 0;
  }
}

std::string Value::undefined_hint() const {
  if (kind_ == Kind::Undefined && p_) return *static_cast<const std::string*>(p_.get());
  return "a value is undefined";
}

const char* type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return v.as_list().tuple ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Function: return "function";
    case Value::Kind::Loop: return "LoopContext";
  }
  return "?";
}

bool truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int() != 0;
    case Value::Kind::Float: return v.as_float() != 0.0;
    case Value::Kind::String: return !v.as_str().empty();
    case Value::Kind::List: return !v.as_list().items.empty();
    case Value::Kind::Dict: return v.as_dict().size() != 0;
    default: return true;
  }
}

namespace {

void repr_into(const Value& v, std::string& out, int depth);

void str_into(const Value& v, std::string& out, int depth) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return;
    case Value::Kind::String: out += v.as_str(); return;
    default: repr_into(v, out, depth);
  }
}

void repr_into(const Value& v, std::string& out, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Value::Kind::Undefined: out += "Undefined"; return;
    case Value::Kind::None: out += "None"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "True" : "False"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: out += py_float_repr(v.as_float()); return;
    case Value::Kind::String: out += py_str_repr(v.as_str()); return;
    case Value::Kind::List: {
      auto& l = v.as_list();
      out += l.tuple ? '(' : '[';
      for (size_t i = 0; i < l.items.size(); ++i) {
        if (i) out += ", ";
        repr_into(l.items[i], out, depth + 1);
      }
      if (l.tuple && l.items.size() == 1) out += ',';
      out += l.tuple ? ')' : ']';
      return;
    }
    case Value::Kind::Dict:
    case Value::Kind::Namespace: {
      bool ns = v.kind() == Value::Kind::Namespace;
      if (ns) out += "<Namespace ";
      out += '{';
      bool first = true;
      for (auto& [k, x] : v.as_dict().items()) {
        if (!first) out += ", ";
        first = false;
        out += py_str_repr(k);
        out += ": ";
        repr_into(x, out, depth + 1);
      }
      out += '}';
      if (ns) out += '>';
      return;
    }
    case Value::Kind::Function: out += fmt::format("<Macro '{}'>", v.as_func().name); return;
    case Value::Kind::Loop: out += "<LoopContext>"; return;
  }
}

bool equals_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float) return a.as_int() == b.as_int();
    return a.as_float() == b.as_float();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.as_str() == b.as_str();
    case Value::Kind::List: {
      auto& x = a.as_list();
      auto& y = b.as_list();
      if (x.tuple != y.tuple || x.items.size() != y.items.size()) return false;
      for (size_t i = 0; i < x.items.size(); ++i)
        if (!equals_at(x.items[i], y.items[i], depth + 1)) return false;
      return true;
    }
    case Value::Kind::Dict: {
      auto& x = a.as_dict();
      auto& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (auto& [k, xv] : x.items()) {
        const Value* yv = y.find(k);
        if (!yv || !equals_at(xv, *yv, depth + 1)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

int compare_at(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_undefined()) eval_fail(a.undefined_hint());
  if (b.is_undefined()) eval_fail(b.undefined_hint());
  if (a.is_number() && b.is_number()) {
    if (a.kind() != Value::Kind::Float && b.kind() != Value::Kind::Float)
      return a.as_int() < b.as_int() ? -1 : (a.as_int() > b.as_int() ? 1 : 0);
    double x = a.as_float(), y = b.as_float();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.as_str().compare(b.as_str());  // byte order of UTF-8 == code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list() && a.as_list().tuple == b.as_list().tuple) {
    auto& x = a.as_list().items;
    auto& y = b.as_list().items;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals_at(x[i], y[i], depth + 1)) continue;
      return compare_at(x[i], y[i], depth + 1);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  eval_fail(fmt::format("'<' not supported between instances of '{}' and '{}'", type_name(a), type_name(b)));
}

void newline_indent(const JsonStyle& st, int level, std::string& out) {
  out += '\n';
  for (int i = 0; i < level; ++i) out += st.indent;
}

void dump_at(const Value& v, const JsonStyle& st, std::string& out, int depth) {
  check_depth(depth);
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      double d = v.as_float();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += py_float_repr(d);
      return;
    }
    case Value::Kind::String: json_quote(v.as_str(), st.ensure_ascii, out); return;
    case Value::Kind::List: {
      auto& items = v.as_list().items;
      if (items.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += st.item_sep;
        if (st.pretty) newline_indent(st, depth + 1, out);
        dump_at(items[i], st, out, depth + 1);
      }
      if (st.pretty) newline_indent(st, depth, out);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      auto& d = v.as_dict();
      if (d.size() == 0) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> order;
      for (auto& kv : d.items()) order.push_back(&kv);
      if (st.sort_keys)
        std::stable_sort(order.begin(), order.end(), [](auto* x, auto* y) { return x->first < y->first; });
      out += '{';
      for (size_t i = 0; i < order.size(); ++i) {
        if (i) out += st.item_sep;
        if (st.pretty) newline_indent(st, depth + 1, out);
        json_quote(order[i]->first, st.ensure_ascii, out);
        out += st.key_sep;
        dump_at(order[i]->second, st, out, depth + 1);
      }
      if (st.pretty) newline_indent(st, depth, out);
      out += '}';
      return;
    }
    default: eval_fail(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
  }
}

Value from_json_at(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxNesting) eval_fail(fmt::format("input JSON nested more than {} levels deep", kMaxNesting));
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<int64_t>());
    case T::number_unsigned: {
      auto u = j.get<uint64_t>();
      // Python would keep an exact big integer; past int64 we fall back to the nearest double.
      return u <= uint64_t(INT64_MAX) ? Value::integer(int64_t(u)) : Value::floating(double(u));
    }
    case T::number_float: return Value::floating(j.get<double>());
    case T::string: return Value::string(j.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (auto& x : j) items.push_back(from_json_at(x, depth + 1));
      return Value::list(std::move(items));
    }
    case T::object: {
      DictObj d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json_at(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default: eval_fail("input JSON holds a value of unsupported type (binary)");
  }
}

}  // namespace

std::string to_str(const Value& v) {
  if (v.is_string()) return v.as_str();
  std::string out;
  str_into(v, out, 0);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  repr_into(v, out, 0);
  return out;
}

bool equals(const Value& a, const Value& b) { return equals_at(a, b, 0); }
int compare(const Value& a, const Value& b) { return compare_at(a, b, 0); }
void dump_json(const Value& v, const JsonStyle& style, std::string& out) { dump_at(v, style, out, 0); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

}  // namespace memra::chat::jinja

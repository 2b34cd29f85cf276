// Jinja filters and tests, with the semantics of Jinja 3's builtins (and transformers' tojson).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include <fmt/format.h>

#include "chat/jinja_interp.h"
#include "chat/jinja_pystr.h"

namespace memra::chat::jinja {

namespace {

using FilterFn = Value (*)(Interp&, const Value&, CallArgs&);
using TestFn = bool (*)(Interp&, const Value&, CallArgs&);


bool is_int(const Value& v) { return v.kind() == Value::Kind::Int || v.kind() == Value::Kind::Bool; }

int64_t int_arg(const Value* v, int64_t dflt, const char* what) {
  if (!v || v->is_none()) return dflt;
  if (!is_int(*v)) eval_fail(fmt::format("{} must be an integer, not '{}'", what, type_name(*v)));
  return v->as_int();
}
bool bool_arg(const Value* v, bool dflt) { return v ? truthy(*v) : dflt; }
const std::string* str_arg(const Value* v, const char* what) {
  if (!v || v->is_none()) return nullptr;
  if (!v->is_string()) eval_fail(fmt::format("{} must be a string, not '{}'", what, type_name(*v)));
  return &v->as_str();
}

std::string escape_html(std::string_view s) {
  std::string out;
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

// Jinja's attribute getter: "a.b.0" walks dict keys / attributes and integer indices.
Value resolve_attr(Interp& in, Value v, const std::string& path) {
  size_t start = 0;
  for (;;) {
    size_t dot = path.find('.', start);
    std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = numeric ? in.get_item(v, Value::integer(std::atoll(part.c_str()))) : in.get_item(v, Value::string(part));
    if (dot == std::string::npos) return v;
    if (v.is_undefined()) return v;
    start = dot + 1;
  }
}

size_t length_of(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return utf8_length(v.as_str());
    case Value::Kind::List: return v.as_list().items.size();
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return v.as_dict().size();
    default: eval_fail(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
}

// Sort key for sort/unique/min/max/dictsort: strings compare lower-cased unless case_sensitive.
Value sort_key(Interp& in, const Value& item, const std::string* attribute, bool case_sensitive) {
  Value k = attribute ? resolve_attr(in, item, *attribute) : item;
  if (!case_sensitive && k.is_string()) return Value::string(py_lower(k.as_str()));
  return k;
}

// ---- filters ----

Value f_abs(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'abs'", {});
  if (v.kind() == Value::Kind::Float) return Value::floating(std::fabs(v.as_float()));
  if (is_int(v)) {
    if (v.as_int() == INT64_MIN) eval_fail("integer overflow");
    return Value::integer(std::llabs(v.as_int()));
  }
  eval_fail(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
}

Value f_attr(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'attr'", {"name"});
  const std::string* name = str_arg(p[0], "attr() name");
  if (!name) eval_fail("filter 'attr' needs a name");
  return in.get_attr(v, *name);
}

Value f_batch(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'batch'", {"linecount", "fill_with"});
  int64_t n = int_arg(p[0], 0, "batch size");
  if (n <= 0) eval_fail("batch size must be positive");
  std::vector<Value> items = in.iterate(v), out, cur;
  for (auto& x : items) {
    cur.push_back(x);
    if (int64_t(cur.size()) == n) out.push_back(Value::list(std::move(cur))), cur.clear();
  }
  if (!cur.empty()) {
    if (p[1])
      while (int64_t(cur.size()) < n) cur.push_back(*p[1]);
    out.push_back(Value::list(std::move(cur)));
  }
  return Value::list(std::move(out));
}

Value f_capitalize(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'capitalize'", {});
  return Value::string(py_capitalize(to_str(v)));
}

Value f_center(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'center'", {"width"});
  std::string s = to_str(v);
  int64_t width = int_arg(p[0], 80, "center width");
  int64_t len = int64_t(utf8_length(s));
  if (width <= len) return Value::string(s);
  in.check_string_size(size_t(width));
  // Python str.center: the extra space goes left when both the padding and the width are odd.
  int64_t pad = width - len;
  int64_t left = pad / 2 + (pad & width & 1);
  return Value::string(std::string(size_t(left), ' ') + s + std::string(size_t(pad - left), ' '));
}

Value f_length(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'length'", {});
  return Value::integer(int64_t(length_of(v)));
}

Value f_default(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'default'", {"default_value", "boolean"});
  bool use_default = v.is_undefined() || (bool_arg(p[1], false) && !truthy(v));
  if (!use_default) return v;
  return p[0] ? *p[0] : Value::string("");
}

Value f_dictsort(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'dictsort'", {"case_sensitive", "by", "reverse"});
  if (!v.is_dict()) eval_fail("dictsort: a dict is required");
  bool cs = bool_arg(p[0], false);
  const std::string* by = str_arg(p[1], "dictsort 'by'");
  bool by_value = by && *by == "value";
  if (by && !by_value && *by != "key") eval_fail("dictsort: 'by' must be 'key' or 'value'");
  std::vector<Value> pairs;
  for (auto& [k, x] : v.as_dict().items()) pairs.push_back(Value::list({Value::string(k), x}, true));
  in.charge_elements(pairs.size());
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    const Value& kx = x.as_list().items[by_value ? 1 : 0];
    const Value& ky = y.as_list().items[by_value ? 1 : 0];
    return compare(sort_key(in, kx, nullptr, cs), sort_key(in, ky, nullptr, cs)) < 0;
  });
  if (bool_arg(p[2], false)) std::reverse(pairs.begin(), pairs.end());
  return Value::list(std::move(pairs));
}

Value f_escape(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'escape'", {});
  if (v.is_markup()) return v;
  return Value::string(escape_html(to_str(v)), true);
}

Value f_first(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'first'", {});
  if (v.is_list()) return v.as_list().items.empty() ? Value::undefined("no first item, the sequence was empty") : v.as_list().items.front();
  std::vector<Value> items = in.iterate(v);
  return items.empty() ? Value::undefined("no first item, the sequence was empty") : items.front();
}

Value f_last(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'last'", {});
  if (v.is_list()) return v.as_list().items.empty() ? Value::undefined("no last item, the sequence was empty") : v.as_list().items.back();
  std::vector<Value> items = in.iterate(v);
  return items.empty() ? Value::undefined("no last item, the sequence was empty") : items.back();
}

bool parse_float(std::string_view s, double& out) {
  std::string t = py_strip(s, nullptr, true, true);
  if (t.empty()) return false;
  std::string clean;
  for (char c : t)
    if (c != '_') clean += c;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

bool parse_int(std::string_view s, int base, int64_t& out) {
  std::string t = py_strip(s, nullptr, true, true);
  std::string clean;
  for (char c : t)
    if (c != '_') clean += c;
  if (clean.empty()) return false;
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(clean.c_str(), &end, base);
  if (errno == ERANGE || end != clean.c_str() + clean.size()) return false;
  out = v;
  return true;
}

Value f_float(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'float'", {"default"});
  Value dflt = p[0] ? *p[0] : Value::floating(0.0);
  if (v.is_number()) return Value::floating(v.as_float());
  double d;
  if (v.is_string() && parse_float(v.as_str(), d)) return Value::floating(d);
  return dflt;
}

Value f_int(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'int'", {"default", "base"});
  Value dflt = p[0] ? *p[0] : Value::integer(0);
  int base = int(int_arg(p[1], 10, "int base"));
  if (is_int(v)) return Value::integer(v.as_int());
  if (v.kind() == Value::Kind::Float) {
    double d = std::trunc(v.as_float());
    if (!(d >= -9.2e18 && d <= 9.2e18)) return dflt;
    return Value::integer(int64_t(d));
  }
  if (!v.is_string()) return dflt;
  int64_t i;
  if (parse_int(v.as_str(), base, i)) return Value::integer(i);
  double d;
  if (parse_float(v.as_str(), d) && d >= -9.2e18 && d <= 9.2e18) return Value::integer(int64_t(std::trunc(d)));
  return dflt;
}

Value f_format(Interp& in, const Value& v, CallArgs& a) {
  if (!a.kw.empty()) eval_fail("filter 'format' with keyword arguments is not supported");
  Value args = a.pos.size() == 1 && a.pos[0].is_dict() ? a.pos[0] : Value::list(a.pos, true);
  return Value::string(percent_format(in, to_str(v), args));
}

Value f_indent(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'indent'", {"width", "first", "blank"});
  std::string ind = (p[0] && p[0]->is_string()) ? p[0]->as_str() : std::string(size_t(std::max<int64_t>(0, int_arg(p[0], 4, "indent width"))), ' ');
  bool first = bool_arg(p[1], false), blank = bool_arg(p[2], false);
  std::vector<std::string> lines = py_splitlines(to_str(v) + "\n", false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (first) rv = ind + rv;
  in.check_string_size(rv.size());
  in.charge_bytes(rv.size());
  return Value::string(std::move(rv), v.is_markup());
}

Value f_items(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'items'", {});
  if (v.is_undefined()) return Value::list({});
  if (!v.is_dict()) eval_fail(fmt::format("filter 'items' needs a mapping, got '{}'", type_name(v)));
  std::vector<Value> out;
  for (auto& [k, x] : v.as_dict().items()) out.push_back(Value::list({Value::string(k), x}, true));
  in.charge_elements(out.size());
  return Value::list(std::move(out));
}

Value f_join(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'join'", {"d", "attribute"});
  std::string sep = p[0] ? to_str(*p[0]) : "";
  const std::string* attr = str_arg(p[1], "join attribute");
  std::string out;
  bool first = true;
  for (auto& x : in.iterate(v)) {
    if (!first) out += sep;
    first = false;
    Value item = attr ? resolve_attr(in, x, *attr) : x;
    out += item.is_string() ? item.as_str() : to_str(item);
    in.check_string_size(out.size());
  }
  in.charge_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_list(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'list'", {});
  if (v.is_list() && !v.as_list().tuple) return v;
  return Value::list(in.iterate(v));
}

Value f_lower(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'lower'", {});
  return Value::string(py_lower(to_str(v)));
}
Value f_upper(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'upper'", {});
  return Value::string(py_upper(to_str(v)));
}

// Jinja's title filter: upper-cases the first letter after a space, dash or opening bracket.
Value f_title(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'title'", {});
  std::string s = to_str(v), out, word;
  auto is_sep = [](char c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  auto flush = [&]() {
    if (!word.empty()) out += py_capitalize(word);
    word.clear();
  };
  for (char c : s) {
    if (is_sep(c)) {
      flush();
      out += c;
    } else {
      word += c;
    }
  }
  flush();
  return Value::string(std::move(out));
}

Value f_map(Interp& in, const Value& v, CallArgs& a) {
  std::vector<Value> items = in.iterate(v), out;
  const Value* attribute = nullptr;
  const Value* dflt = nullptr;
  for (auto& [k, x] : a.kw) {
    if (k == "attribute") attribute = &x;
    else if (k == "default") dflt = &x;
  }
  if (attribute) {
    const std::string* path = str_arg(attribute, "map attribute");
    if (!path) eval_fail("map: attribute must be a string");
    for (auto& x : items) {
      Value r = resolve_attr(in, x, *path);
      out.push_back(r.is_undefined() && dflt ? *dflt : r);
    }
    return Value::list(std::move(out));
  }
  if (a.pos.empty() || !a.pos[0].is_string()) eval_fail("map: give a filter name or attribute=");
  std::string filter = a.pos[0].as_str();
  CallArgs rest;
  rest.pos.assign(a.pos.begin() + 1, a.pos.end());
  rest.kw = a.kw;
  for (auto& x : items) {
    CallArgs copy = rest;
    out.push_back(apply_filter(in, filter, x, copy));
  }
  return Value::list(std::move(out));
}

Value min_max(Interp& in, const Value& v, CallArgs& a, bool want_max) {
  auto p = bind_args(a, want_max ? "filter 'max'" : "filter 'min'", {"case_sensitive", "attribute"});
  bool cs = bool_arg(p[0], false);
  const std::string* attr = str_arg(p[1], "attribute");
  std::vector<Value> items = in.iterate(v);
  if (items.empty()) return Value::undefined("no min/max item, the sequence was empty");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    int c = compare(sort_key(in, items[i], attr, cs), sort_key(in, items[best], attr, cs));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Value f_max(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, true); }
Value f_min(Interp& in, const Value& v, CallArgs& a) { return min_max(in, v, a, false); }

Value f_pprint(Interp&, const Value& v, CallArgs&) { return Value::string(repr(v)); }

Value select_impl(Interp& in, const Value& v, CallArgs& a, bool by_attr, bool keep) {
  std::vector<Value> items = in.iterate(v), out;
  size_t pos = 0;
  const std::string* attr = nullptr;
  if (by_attr) {
    if (a.pos.empty() || !a.pos[0].is_string()) eval_fail("selectattr/rejectattr: the attribute name must be a string");
    attr = &a.pos[0].as_str();
    pos = 1;
  }
  std::string test;
  if (pos < a.pos.size()) {
    if (!a.pos[pos].is_string()) eval_fail("select/reject: the test name must be a string");
    test = a.pos[pos].as_str();
    ++pos;
  }
  CallArgs targs;
  targs.pos.assign(a.pos.begin() + std::ptrdiff_t(std::min(pos, a.pos.size())), a.pos.end());
  targs.kw = a.kw;
  for (auto& x : items) {
    Value subject = attr ? resolve_attr(in, x, *attr) : x;
    bool ok;
    if (test.empty()) {
      ok = truthy(subject);
    } else {
      CallArgs copy = targs;
      ok = apply_test(in, test, subject, copy);
    }
    if (ok == keep) out.push_back(x);
  }
  return Value::list(std::move(out));
}
Value f_select(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, true); }
Value f_reject(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, false, false); }
Value f_selectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, true); }
Value f_rejectattr(Interp& in, const Value& v, CallArgs& a) { return select_impl(in, v, a, true, false); }

Value f_replace(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'replace'", {"old", "new", "count"});
  if (!p[0] || !p[1]) eval_fail("filter 'replace' needs old and new strings");
  std::string s = to_str(v);
  std::string old = to_str(*p[0]), repl = to_str(*p[1]);
  int64_t count = int_arg(p[2], -1, "replace count");
  if (!old.empty() && repl.size() > old.size()) {
    size_t hits = 0;
    for (size_t pos = s.find(old); pos != std::string::npos; pos = s.find(old, pos + old.size())) ++hits;
    in.check_string_size(s.size() + hits * (repl.size() - old.size()));
  } else if (old.empty()) {
    in.check_string_size(s.size() + (s.size() + 1) * repl.size());
  }
  std::string out = py_replace(s, old, repl, count);
  in.charge_bytes(out.size());
  return Value::string(std::move(out), v.is_markup());
}

Value f_reverse(Interp& in, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'reverse'", {});
  std::vector<Value> items = in.iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.is_string()) {
    std::string out;
    for (auto& x : items) out += x.as_str();
    return Value::string(std::move(out));
  }
  return Value::list(std::move(items));
}

Value f_round(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'round'", {"precision", "method"});
  int64_t prec = int_arg(p[0], 0, "round precision");
  const std::string* method = str_arg(p[1], "round method");
  if (!v.is_number()) eval_fail(fmt::format("filter 'round' needs a number, got '{}'", type_name(v)));
  double x = v.as_float();
  if (prec < -300 || prec > 300) eval_fail("round precision out of range");
  if (!method || *method == "common") {
    if (prec >= 0) {
      // Python's round(): correctly rounded, ties to even on the exact binary value; printf does the same.
      char buf[512];
      std::snprintf(buf, sizeof buf, "%.*f", int(prec), x);
      return Value::floating(std::strtod(buf, nullptr));
    }
    double m = std::pow(10.0, double(-prec));
    return Value::floating(std::nearbyint(x / m) * m);
  }
  double m = std::pow(10.0, double(prec));
  if (*method == "ceil") return Value::floating(std::ceil(x * m) / m);
  if (*method == "floor") return Value::floating(std::floor(x * m) / m);
  eval_fail("round method must be 'common', 'ceil' or 'floor'");
}

Value f_safe(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'safe'", {});
  return Value::string(to_str(v), true);
}

Value f_sort(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'sort'", {"reverse", "case_sensitive", "attribute"});
  bool rev = bool_arg(p[0], false), cs = bool_arg(p[1], false);
  const std::string* attr = str_arg(p[2], "sort attribute");
  std::vector<Value> items = in.iterate(v);
  std::vector<std::pair<Value, size_t>> keyed;
  for (size_t i = 0; i < items.size(); ++i) keyed.emplace_back(sort_key(in, items[i], attr, cs), i);
  std::stable_sort(keyed.begin(), keyed.end(), [&](auto& x, auto& y) {
    int c = compare(x.first, y.first);
    return rev ? c > 0 : c < 0;
  });
  std::vector<Value> out;
  for (auto& k : keyed) out.push_back(items[k.second]);
  return Value::list(std::move(out));
}

Value f_string(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'string'", {});
  if (v.is_string()) return v;
  return Value::string(to_str(v));
}

Value f_sum(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'sum'", {"attribute", "start"});
  const std::string* attr = str_arg(p[0], "sum attribute");
  Value total = p[1] ? *p[1] : Value::integer(0);
  for (auto& x : in.iterate(v)) {
    Value item = attr ? resolve_attr(in, x, *attr) : x;
    if (!total.is_number() || !item.is_number())
      eval_fail(fmt::format("filter 'sum' cannot add '{}' to '{}'", type_name(item), type_name(total)));
    bool ints = total.kind() != Value::Kind::Float && item.kind() != Value::Kind::Float;
    if (ints) {
      int64_t r;
      if (__builtin_add_overflow(total.as_int(), item.as_int(), &r)) eval_fail("integer overflow");
      total = Value::integer(r);
    } else {
      total = Value::floating(total.as_float() + item.as_float());
    }
  }
  return total;
}

Value f_tojson(Interp& in, const Value& v, CallArgs& a) {
  // transformers' signature: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  auto p = bind_args(a, "filter 'tojson'", {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonStyle st;
  st.ensure_ascii = bool_arg(p[0], false);
  st.sort_keys = bool_arg(p[3], false);
  if (p[1] && !p[1]->is_none()) {
    st.pretty = true;
    if (p[1]->is_string()) st.indent = p[1]->as_str();
    else st.indent = std::string(size_t(std::clamp<int64_t>(int_arg(p[1], 0, "tojson indent"), 0, 64)), ' ');
    st.item_sep = ",";
  }
  if (p[2] && !p[2]->is_none()) {
    if (!p[2]->is_list() || p[2]->as_list().items.size() != 2 || !p[2]->as_list().items[0].is_string() ||
        !p[2]->as_list().items[1].is_string())
      eval_fail("tojson separators must be a pair of strings");
    st.item_sep = p[2]->as_list().items[0].as_str();
    st.key_sep = p[2]->as_list().items[1].as_str();
  }
  std::string out;
  dump_json(v, st, out);
  in.check_string_size(out.size());
  in.charge_bytes(out.size());
  return Value::string(std::move(out));
}

Value f_trim(Interp&, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'trim'", {"chars"});
  const std::string* chars = str_arg(p[0], "trim chars");
  return Value::string(py_strip(to_str(v), chars, true, true), v.is_markup());
}

Value f_unique(Interp& in, const Value& v, CallArgs& a) {
  auto p = bind_args(a, "filter 'unique'", {"case_sensitive", "attribute"});
  bool cs = bool_arg(p[0], false);
  const std::string* attr = str_arg(p[1], "unique attribute");
  std::vector<Value> out, seen;
  for (auto& x : in.iterate(v)) {
    Value k = sort_key(in, x, attr, cs);
    bool dup = false;
    for (auto& s : seen)
      if (equals(s, k)) dup = true;
    in.charge(seen.size());
    if (dup) continue;
    seen.push_back(k);
    out.push_back(x);
  }
  return Value::list(std::move(out));
}

Value f_wordcount(Interp&, const Value& v, CallArgs& a) {
  bind_args(a, "filter 'wordcount'", {});
  int64_t n = 0;
  bool in_word = false;
  for (unsigned char c : to_str(v)) {
    bool w = std::isalnum(c) || c == '_' || c >= 0x80;
    if (w && !in_word) ++n;
    in_word = w;
  }
  return Value::integer(n);
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},
      {"capitalize", f_capitalize}, {"center", f_center}, {"count", f_length},
      {"d", f_default},         {"default", f_default},   {"dictsort", f_dictsort},
      {"e", f_escape},          {"escape", f_escape},     {"forceescape", f_escape},
      {"first", f_first},       {"float", f_float},       {"format", f_format},
      {"indent", f_indent},     {"int", f_int},           {"items", f_items},
      {"join", f_join},         {"last", f_last},         {"length", f_length},
      {"list", f_list},         {"lower", f_lower},       {"map", f_map},
      {"max", f_max},           {"min", f_min},           {"pprint", f_pprint},
      {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
      {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},
      {"select", f_select},     {"selectattr", f_selectattr}, {"sort", f_sort},
      {"string", f_string},     {"sum", f_sum},           {"title", f_title},
      {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},
      {"upper", f_upper},       {"wordcount", f_wordcount},
  };
  return table;
}

// ---- tests ----

const Value& one_arg(CallArgs& a, const char* test) {
  if (a.pos.size() != 1 || !a.kw.empty()) eval_fail(fmt::format("test '{}' takes one argument", test));
  return a.pos[0];
}
void no_args(CallArgs& a, const char* test) {
  if (!a.pos.empty() || !a.kw.empty()) eval_fail(fmt::format("test '{}' takes no arguments", test));
}

bool t_defined(Interp&, const Value& v, CallArgs& a) { return no_args(a, "defined"), !v.is_undefined(); }
bool t_undefined(Interp&, const Value& v, CallArgs& a) { return no_args(a, "undefined"), v.is_undefined(); }
bool t_none(Interp&, const Value& v, CallArgs& a) { return no_args(a, "none"), v.is_none(); }
bool t_boolean(Interp&, const Value& v, CallArgs& a) { return no_args(a, "boolean"), v.kind() == Value::Kind::Bool; }
bool t_true(Interp&, const Value& v, CallArgs& a) { return no_args(a, "true"), v.kind() == Value::Kind::Bool && v.as_bool(); }
bool t_false(Interp&, const Value& v, CallArgs& a) { return no_args(a, "false"), v.kind() == Value::Kind::Bool && !v.as_bool(); }
bool t_integer(Interp&, const Value& v, CallArgs& a) { return no_args(a, "integer"), v.kind() == Value::Kind::Int; }
bool t_float(Interp&, const Value& v, CallArgs& a) { return no_args(a, "float"), v.kind() == Value::Kind::Float; }
bool t_number(Interp&, const Value& v, CallArgs& a) { return no_args(a, "number"), v.is_number(); }
bool t_string(Interp&, const Value& v, CallArgs& a) { return no_args(a, "string"), v.is_string(); }
bool t_mapping(Interp&, const Value& v, CallArgs& a) { return no_args(a, "mapping"), v.is_dict(); }
bool t_iterable(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "iterable");
  auto k = v.kind();
  return k == Value::Kind::Undefined || k == Value::Kind::String || k == Value::Kind::List || k == Value::Kind::Dict ||
         k == Value::Kind::Loop;
}
bool t_sequence(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "sequence");
  auto k = v.kind();  // Python: has len() and __getitem__ (Undefined has both)
  return k == Value::Kind::Undefined || k == Value::Kind::String || k == Value::Kind::List || k == Value::Kind::Dict;
}
bool t_callable(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "callable");
  return v.kind() == Value::Kind::Function || v.kind() == Value::Kind::Loop;
}
bool t_escaped(Interp&, const Value& v, CallArgs& a) { return no_args(a, "escaped"), v.is_markup(); }
bool t_eq(Interp&, const Value& v, CallArgs& a) { return equals(v, one_arg(a, "eq")); }
bool t_ne(Interp&, const Value& v, CallArgs& a) { return !equals(v, one_arg(a, "ne")); }
bool t_lt(Interp&, const Value& v, CallArgs& a) { return compare(v, one_arg(a, "lt")) < 0; }
bool t_le(Interp&, const Value& v, CallArgs& a) { return compare(v, one_arg(a, "le")) <= 0; }
bool t_gt(Interp&, const Value& v, CallArgs& a) { return compare(v, one_arg(a, "gt")) > 0; }
bool t_ge(Interp&, const Value& v, CallArgs& a) { return compare(v, one_arg(a, "ge")) >= 0; }
bool t_in(Interp& in, const Value& v, CallArgs& a) {
  const Value& seq = one_arg(a, "in");
  if (seq.is_string()) {
    if (!v.is_string()) eval_fail("'in <string>' requires a string as left operand");
    return seq.as_str().find(v.as_str()) != std::string::npos;
  }
  if (seq.is_dict()) return v.is_string() && seq.as_dict().find(v.as_str());
  for (auto& x : in.iterate(seq))
    if (equals(x, v)) return true;
  return false;
}
bool t_sameas(Interp&, const Value& v, CallArgs& a) {
  const Value& o = one_arg(a, "sameas");
  if (v.kind() != o.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::None:
    case Value::Kind::Undefined: return true;
    case Value::Kind::Bool: return v.as_bool() == o.as_bool();
    case Value::Kind::Int: return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;  // CPython's cached ints
    default: return v.identity() != nullptr && v.identity() == o.identity();
  }
}
int64_t int_of(const Value& v, const char* test) {
  if (!is_int(v)) eval_fail(fmt::format("test '{}' needs an integer, got '{}'", test, type_name(v)));
  return v.as_int();
}
bool t_even(Interp&, const Value& v, CallArgs& a) { return no_args(a, "even"), int_of(v, "even") % 2 == 0; }
bool t_odd(Interp&, const Value& v, CallArgs& a) { return no_args(a, "odd"), int_of(v, "odd") % 2 != 0; }
bool t_divisibleby(Interp&, const Value& v, CallArgs& a) {
  int64_t d = int_of(one_arg(a, "divisibleby"), "divisibleby");
  if (d == 0) eval_fail("divisibleby 0");
  if (d == -1) return true;
  return int_of(v, "divisibleby") % d == 0;
}
bool t_lower(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  std::string s = to_str(v);
  return py_lower(s) == s && py_upper(s) != s;
}
bool t_upper(Interp&, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  std::string s = to_str(v);
  return py_upper(s) == s && py_lower(s) != s;
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = {
      {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},         {"boolean", t_boolean},
      {"true", t_true},         {"false", t_false},         {"integer", t_integer},   {"float", t_float},
      {"number", t_number},     {"string", t_string},       {"mapping", t_mapping},   {"iterable", t_iterable},
      {"sequence", t_sequence}, {"callable", t_callable},   {"escaped", t_escaped},   {"eq", t_eq},
      {"equalto", t_eq},        {"==", t_eq},               {"ne", t_ne},             {"!=", t_ne},
      {"lt", t_lt},             {"lessthan", t_lt},         {"<", t_lt},              {"le", t_le},
      {"<=", t_le},             {"gt", t_gt},               {"greaterthan", t_gt},    {">", t_gt},
      {"ge", t_ge},             {">=", t_ge},               {"in", t_in},             {"sameas", t_sameas},
      {"even", t_even},         {"odd", t_odd},             {"divisibleby", t_divisibleby},
      {"lower", t_lower},       {"upper", t_upper},
  };
  return table;
}

}  // namespace

Value apply_filter(Interp& in, const std::string& name, const Value& input, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) eval_fail(fmt::format("unknown filter '{}'", name));
  return it->second(in, input, args);
}

bool apply_test(Interp& in, const std::string& name, const Value& input, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) eval_fail(fmt::format("unknown test '{}'", name));
  return it->second(in, input, args);
}

}  // namespace memra::chat::jinja

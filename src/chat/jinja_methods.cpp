// Python methods on str / dict / list / loop values, the template globals (range, namespace,
// dict, raise_exception, strftime_now) and Python string formatting (% and str.format).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "chat/jinja_interp.h"
#include "chat/jinja_pystr.h"

namespace memra::chat::jinja {

std::vector<const Value*> bind_args(const CallArgs& args, std::string_view what,
                                    std::initializer_list<std::string_view> params) {
  std::vector<const Value*> out(params.size(), nullptr);
  if (args.pos.size() > params.size())
    eval_fail(fmt::format("{} takes at most {} argument(s), got {}", what, params.size(), args.pos.size()));
  for (size_t i = 0; i < args.pos.size(); ++i) out[i] = &args.pos[i];
  for (auto& [k, v] : args.kw) {
    auto it = std::find(params.begin(), params.end(), k);
    if (it == params.end()) eval_fail(fmt::format("{} got an unexpected keyword argument '{}'", what, k));
    size_t idx = size_t(it - params.begin());
    if (out[idx]) eval_fail(fmt::format("{} got two values for argument '{}'", what, k));
    out[idx] = &v;
  }
  return out;
}

namespace {

const std::unordered_set<std::string>& str_methods() {
  static const std::unordered_set<std::string> s = {
      "startswith", "endswith", "split",  "rsplit",     "splitlines",   "strip",     "lstrip",  "rstrip",
      "lower",      "upper",    "title",  "capitalize", "replace",      "find",      "rfind",   "index",
      "rindex",     "count",    "join",   "format",     "isdigit",      "isalpha",   "isalnum", "isspace",
      "islower",    "isupper",  "removeprefix", "removesuffix", "center", "ljust",   "rjust",   "zfill",
      "partition",  "rpartition", "swapcase", "casefold", "isnumeric", "isdecimal"};
  return s;
}
const std::unordered_set<std::string>& dict_methods() {
  static const std::unordered_set<std::string> s = {"items", "keys", "values", "get", "copy",
                                                    "update", "pop", "popitem", "setdefault", "clear"};
  return s;
}
const std::unordered_set<std::string>& list_methods() {
  static const std::unordered_set<std::string> s = {"index", "count", "copy", "append", "extend", "pop",
                                                    "insert", "remove", "reverse", "sort", "clear"};
  return s;
}
bool is_mutator(const std::string& m) {
  static const std::unordered_set<std::string> s = {"update", "pop",    "popitem", "setdefault", "clear", "append",
                                                    "extend", "insert", "remove",  "reverse",    "sort"};
  return s.count(m) != 0;
}

const std::string& str_param(const Value* v, const char* what) {
  if (!v || !v->is_string()) eval_fail(fmt::format("{} must be a string", what));
  return v->as_str();
}
int64_t int_param(const Value* v, int64_t dflt, const char* what) {
  if (!v || v->is_none()) return dflt;
  if (v->kind() != Value::Kind::Int && v->kind() != Value::Kind::Bool) eval_fail(fmt::format("{} must be an integer", what));
  return v->as_int();
}

Value str_list(std::vector<std::string> parts) {
  std::vector<Value> out;
  out.reserve(parts.size());
  for (auto& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

bool all_cps(const std::string& s, bool (*pred)(char32_t)) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();)
    if (!pred(utf8_next(s, i))) return false;
  return true;
}
bool ascii_digit(char32_t c) { return c >= '0' && c <= '9'; }
bool alpha_cp(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80; }
bool alnum_cp(char32_t c) { return ascii_digit(c) || alpha_cp(c); }

// Python str.format: {} {0} {name} {x!r} {x:spec}; specs use fmt, whose syntax is Python's.
std::string str_format(Interp& in, const std::string& f, const CallArgs& args) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}') ++i;
      else eval_fail("str.format: single '}' in format string");
      out += '}';
      continue;
    }
    if (c != '{') {
      out += c;
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out += '{';
      ++i;
      continue;
    }
    size_t close = f.find('}', i);
    if (close == std::string::npos) eval_fail("str.format: unmatched '{' in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    i = close;
    std::string spec, conv;
    if (size_t colon = field.find(':'); colon != std::string::npos) spec = field.substr(colon + 1), field.resize(colon);
    if (size_t bang = field.find('!'); bang != std::string::npos) conv = field.substr(bang + 1), field.resize(bang);
    const Value* arg = nullptr;
    if (field.empty()) {
      if (auto_idx >= args.pos.size()) eval_fail("str.format: not enough positional arguments");
      arg = &args.pos[auto_idx++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      size_t idx = size_t(std::atoll(field.c_str()));
      if (idx >= args.pos.size()) eval_fail(fmt::format("str.format: no positional argument {}", idx));
      arg = &args.pos[idx];
    } else {
      for (auto& [k, v] : args.kw)
        if (k == field) arg = &v;
      if (!arg) eval_fail(fmt::format("str.format: no argument named '{}'", field));
    }
    Value v = *arg;
    if (conv == "r") v = Value::string(repr(v));
    else if (!conv.empty() && conv != "s") eval_fail(fmt::format("str.format: unknown conversion '!{}'", conv));
    if (spec.empty()) {
      out += to_str(v);
    } else {
      try {
        const std::string pattern = "{:" + spec + "}";
        auto rt = fmt::runtime(pattern);
        if (v.kind() == Value::Kind::Int) out += fmt::format(rt, v.as_int());
        else if (v.kind() == Value::Kind::Float) out += fmt::format(rt, v.as_float());
        else out += fmt::format(rt, to_str(v));
      } catch (const fmt::format_error&) {
        eval_fail(fmt::format("str.format: unsupported format spec ':{}'", spec));
      }
    }
    in.check_string_size(out.size());
  }
  in.charge_bytes(out.size());
  return out;
}

Value string_method(Interp& in, const Value& obj, const std::string& m, CallArgs& a) {
  const std::string& s = obj.as_str();
  std::string what = "str." + m + "()";
  if (m == "startswith" || m == "endswith") {
    auto p = bind_args(a, what, {"prefix"});
    if (!p[0]) eval_fail(what + " needs an argument");
    std::vector<Value> cands = p[0]->is_list() ? p[0]->as_list().items : std::vector<Value>{*p[0]};
    for (auto& c : cands) {
      const std::string& x = str_param(&c, what.c_str());
      bool hit = m == "startswith" ? s.compare(0, x.size(), x) == 0
                                   : (s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0);
      if (hit) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  if (m == "split" || m == "rsplit") {
    auto p = bind_args(a, what, {"sep", "maxsplit"});
    int64_t maxsplit = int_param(p[1], -1, "maxsplit");
    if (!p[0] || p[0]->is_none()) {
      return str_list(m == "split" ? py_split_ws(s, maxsplit) : py_rsplit_ws(s, maxsplit));
    }
    const std::string& sep = str_param(p[0], "sep");
    if (sep.empty()) eval_fail("empty separator");
    in.charge_elements(s.size() / sep.size());
    return str_list(m == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit));
  }
  if (m == "splitlines") {
    auto p = bind_args(a, what, {"keepends"});
    return str_list(py_splitlines(s, p[0] && truthy(*p[0])));
  }
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    auto p = bind_args(a, what, {"chars"});
    const std::string* chars = (p[0] && !p[0]->is_none()) ? &str_param(p[0], "chars") : nullptr;
    return Value::string(py_strip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "lower" || m == "casefold") return bind_args(a, what, {}), Value::string(py_lower(s));
  if (m == "upper") return bind_args(a, what, {}), Value::string(py_upper(s));
  if (m == "title") return bind_args(a, what, {}), Value::string(py_title(s));
  if (m == "capitalize") return bind_args(a, what, {}), Value::string(py_capitalize(s));
  if (m == "swapcase") {
    bind_args(a, what, {});
    std::string out;
    for (size_t i = 0; i < s.size();) {
      size_t st = i;
      utf8_next(s, i);
      std::string ch = s.substr(st, i - st);
      std::string lo = py_lower(ch);
      out += lo != ch ? lo : py_upper(ch);
    }
    return Value::string(std::move(out));
  }
  if (m == "replace") {
    auto p = bind_args(a, what, {"old", "new", "count"});
    const std::string& old = str_param(p[0], "old");
    const std::string& repl = str_param(p[1], "new");
    size_t hits = 0;
    if (old.empty()) hits = s.size() + 1;
    else
      for (size_t pos = s.find(old); pos != std::string::npos; pos = s.find(old, pos + old.size())) ++hits;
    if (repl.size() > old.size()) in.check_string_size(s.size() + hits * (repl.size() - old.size()));
    std::string out = py_replace(s, old, repl, int_param(p[2], -1, "count"));
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex" || m == "count") {
    auto p = bind_args(a, what, {"sub"});
    const std::string& sub = str_param(p[0], "sub");
    if (m == "count") {
      if (sub.empty()) return Value::integer(int64_t(utf8_length(s)) + 1);
      int64_t n = 0;
      for (size_t pos = s.find(sub); pos != std::string::npos; pos = s.find(sub, pos + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t pos = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
    if (pos == std::string::npos) {
      if (m == "index" || m == "rindex") eval_fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(int64_t(utf8_length(std::string_view(s).substr(0, pos))));
  }
  if (m == "join") {
    auto p = bind_args(a, what, {"iterable"});
    if (!p[0]) eval_fail("str.join() needs an argument");
    std::string out;
    bool first = true;
    for (auto& x : in.iterate(*p[0])) {
      if (!x.is_string()) eval_fail(fmt::format("str.join(): expected str items, got '{}'", type_name(x)));
      if (!first) out += s;
      first = false;
      out += x.as_str();
      in.check_string_size(out.size());
    }
    in.charge_bytes(out.size());
    return Value::string(std::move(out));
  }
  if (m == "format") return Value::string(str_format(in, s, a));
  if (m == "isdigit" || m == "isnumeric" || m == "isdecimal") return bind_args(a, what, {}), Value::boolean(all_cps(s, ascii_digit));
  if (m == "isalpha") return bind_args(a, what, {}), Value::boolean(all_cps(s, alpha_cp));
  if (m == "isalnum") return bind_args(a, what, {}), Value::boolean(all_cps(s, alnum_cp));
  if (m == "isspace") return bind_args(a, what, {}), Value::boolean(all_cps(s, py_isspace));
  if (m == "islower" || m == "isupper") {
    bind_args(a, what, {});
    std::string lo = py_lower(s), up = py_upper(s);
    return Value::boolean(m == "islower" ? (lo == s && up != s) : (up == s && lo != s));
  }
  if (m == "removeprefix" || m == "removesuffix") {
    auto p = bind_args(a, what, {"affix"});
    const std::string& x = str_param(p[0], "affix");
    if (m == "removeprefix") return Value::string(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    bool ends = s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
    return Value::string(ends ? s.substr(0, s.size() - x.size()) : s);
  }
  if (m == "center" || m == "ljust" || m == "rjust" || m == "zfill") {
    auto p = bind_args(a, what, {"width", "fillchar"});
    int64_t width = int_param(p[0], 0, "width");
    std::string fill = p[1] ? str_param(p[1], "fillchar") : (m == "zfill" ? "0" : " ");
    int64_t len = int64_t(utf8_length(s));
    if (width <= len) return obj;
    in.check_string_size(size_t(width) * fill.size());
    int64_t pad = width - len;
    int64_t left = m == "rjust" || m == "zfill" ? pad : m == "ljust" ? 0 : pad / 2 + (pad & width & 1);
    auto rep = [&](int64_t n) {
      std::string r;
      for (int64_t k = 0; k < n; ++k) r += fill;
      return r;
    };
    if (m == "zfill" && !s.empty() && (s[0] == '-' || s[0] == '+')) return Value::string(s.substr(0, 1) + rep(left) + s.substr(1));
    return Value::string(rep(left) + s + rep(pad - left));
  }
  if (m == "partition" || m == "rpartition") {
    auto p = bind_args(a, what, {"sep"});
    const std::string& sep = str_param(p[0], "sep");
    if (sep.empty()) eval_fail("empty separator");
    size_t pos = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (pos == std::string::npos) {
      if (m == "partition") return Value::list({Value::string(s), Value::string(""), Value::string("")}, true);
      return Value::list({Value::string(""), Value::string(""), Value::string(s)}, true);
    }
    return Value::list({Value::string(s.substr(0, pos)), Value::string(sep), Value::string(s.substr(pos + sep.size()))}, true);
  }
  eval_fail(fmt::format("'str' object has no method '{}'", m));
}

Value dict_method(Interp& in, const Value& obj, const std::string& m, CallArgs& a) {
  const DictObj& d = obj.as_dict();
  std::string what = "dict." + m + "()";
  if (m == "items" || m == "keys" || m == "values") {
    bind_args(a, what, {});
    std::vector<Value> out;
    out.reserve(d.size());
    for (auto& [k, v] : d.items()) {
      if (m == "items") out.push_back(Value::list({Value::string(k), v}, true));
      else if (m == "keys") out.push_back(Value::string(k));
      else out.push_back(v);
    }
    in.charge_elements(out.size());
    return Value::list(std::move(out));
  }
  if (m == "get") {
    auto p = bind_args(a, what, {"key", "default"});
    if (!p[0]) eval_fail("dict.get() needs a key");
    const Value* v = p[0]->is_string() ? d.find(p[0]->as_str()) : nullptr;
    if (v) return *v;
    return p[1] ? *p[1] : Value::none();
  }
  if (m == "copy") return bind_args(a, what, {}), obj;
  eval_fail(fmt::format("'dict' object has no method '{}'", m));
}

Value list_method(Interp&, const Value& obj, const std::string& m, CallArgs& a) {
  const auto& items = obj.as_list().items;
  std::string what = "list." + m + "()";
  if (m == "index" || m == "count") {
    auto p = bind_args(a, what, {"value"});
    if (!p[0]) eval_fail(what + " needs an argument");
    int64_t n = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!equals(items[i], *p[0])) continue;
      if (m == "index") return Value::integer(int64_t(i));
      ++n;
    }
    if (m == "index") eval_fail(fmt::format("{} is not in list", repr(*p[0])));
    return Value::integer(n);
  }
  if (m == "copy") return bind_args(a, what, {}), obj;
  eval_fail(fmt::format("'list' object has no method '{}'", m));
}

Value loop_method(Interp&, const Value& obj, const std::string& m, CallArgs& a) {
  LoopObj& l = obj.as_loop();
  if (m == "cycle") {
    if (a.pos.empty()) eval_fail("loop.cycle() needs at least one value");
    return a.pos[l.index0 % a.pos.size()];
  }
  // loop.changed(*values): true on the first call and whenever the values differ from the last call.
  Value now = Value::list(a.pos, true);
  bool changed = !l.has_changed || !equals(l.last_changed, now);
  l.last_changed = now;
  l.has_changed = true;
  return Value::boolean(changed);
}

// ---- globals ----

Value g_range(Interp& in, CallArgs& a) {
  if (!a.kw.empty() || a.pos.empty() || a.pos.size() > 3) eval_fail("range() takes 1 to 3 integer arguments");
  for (auto& v : a.pos)
    if (v.kind() != Value::Kind::Int && v.kind() != Value::Kind::Bool)
      eval_fail(fmt::format("range() arguments must be integers, not '{}'", type_name(v)));
  int64_t start = 0, stop, step = 1;
  if (a.pos.size() == 1) stop = a.pos[0].as_int();
  else start = a.pos[0].as_int(), stop = a.pos[1].as_int();
  if (a.pos.size() == 3) step = a.pos[2].as_int();
  if (step == 0) eval_fail("range() step must not be zero");
  // Element count computed in 128 bits so that extreme bounds cannot overflow.
  __int128 span = step > 0 ? (__int128(stop) - start) : (__int128(start) - stop);
  __int128 n128 = span <= 0 ? 0 : (span + (step > 0 ? step : -__int128(step)) - 1) / (step > 0 ? step : -__int128(step));
  if (n128 > __int128(1) << 40) in.check_list_size(size_t(1) << 40);
  size_t n = size_t(n128);
  in.check_list_size(n);
  in.charge_elements(n);
  std::vector<Value> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) out.push_back(Value::integer(start + int64_t(i) * step));
  return Value::list(std::move(out));
}

DictObj dict_from_args(CallArgs& a, const char* what) {
  DictObj d;
  if (a.pos.size() > 1) eval_fail(fmt::format("{}() takes at most one positional argument", what));
  if (a.pos.size() == 1) {
    if (!a.pos[0].is_dict() && a.pos[0].kind() != Value::Kind::Namespace)
      eval_fail(fmt::format("{}(): the positional argument must be a dict", what));
    for (auto& [k, v] : a.pos[0].as_dict().items()) d.set(k, v);
  }
  for (auto& [k, v] : a.kw) d.set(k, v);
  return d;
}

Value g_namespace(Interp& in, CallArgs& a) { return in.new_namespace(dict_from_args(a, "namespace")); }
Value g_dict(Interp&, CallArgs& a) { return Value::dict(dict_from_args(a, "dict")); }

Value g_raise_exception(Interp&, CallArgs& a) {
  std::string msg = a.pos.empty() ? std::string("(no message)") : to_str(a.pos[0]);
  throw TemplateError(fmt::format("chat template rejected the request: {}", msg));
}

Value g_strftime_now(Interp&, CallArgs& a) {
  auto p = bind_args(a, "strftime_now()", {"format"});
  const std::string& f = str_param(p[0], "strftime_now format");
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  size_t n = std::strftime(buf, sizeof buf, f.c_str(), &tm);
  if (n == 0 && !f.empty()) eval_fail("strftime_now: format too long or empty result");
  return Value::string(std::string(buf, n));
}

}  // namespace

bool has_method(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::String: return str_methods().count(name) != 0;
    case Value::Kind::Dict: return dict_methods().count(name) != 0;
    case Value::Kind::List: return list_methods().count(name) != 0;
    case Value::Kind::Loop: return name == "cycle" || name == "changed";
    default: return false;
  }
}

Value call_method(Interp& in, const Value& obj, const std::string& name, CallArgs& args, bool& found) {
  found = has_method(obj, name);
  if (!found) return Value();
  if (is_mutator(name) && (obj.is_dict() || obj.is_list()))
    eval_fail(fmt::format("{}.{}() would modify a value, which chat templates may not do (they run in an immutable sandbox)",
                          type_name(obj), name));
  switch (obj.kind()) {
    case Value::Kind::String: return string_method(in, obj, name, args);
    case Value::Kind::Dict: return dict_method(in, obj, name, args);
    case Value::Kind::List: return list_method(in, obj, name, args);
    default: return loop_method(in, obj, name, args);
  }
}

Value Interp::global(const std::string& name) {
  using Fn = Value (*)(Interp&, CallArgs&);
  static const std::unordered_map<std::string, Fn> fns = {
      {"range", g_range},
      {"namespace", g_namespace},
      {"dict", g_dict},
      {"raise_exception", g_raise_exception},
      {"strftime_now", g_strftime_now},
  };
  auto it = fns.find(name);
  if (it == fns.end()) return Value();
  return Value::function(name, it->second);
}

std::string percent_format(Interp& in, const std::string& f, const Value& args) {
  std::vector<Value> pos;
  const DictObj* named = nullptr;
  if (args.is_list() && args.as_list().tuple) pos = args.as_list().items;
  else if (args.is_dict()) named = &args.as_dict();
  else pos.push_back(args);
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') {
      out += f[i];
      continue;
    }
    if (++i >= f.size()) eval_fail("incomplete format: '%' at the end");
    const Value* arg = nullptr;
    if (f[i] == '(') {
      size_t close = f.find(')', i);
      if (close == std::string::npos || !named) eval_fail("format requires a mapping for %(name)");
      arg = named->find(f.substr(i + 1, close - i - 1));
      if (!arg) eval_fail(fmt::format("format: no key '{}'", f.substr(i + 1, close - i - 1)));
      i = close + 1;
    }
    std::string spec = "%";
    while (i < f.size() && std::strchr("-+ #0", f[i])) spec += f[i++];
    while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) spec += f[i++];
    if (i < f.size() && f[i] == '.') {
      spec += f[i++];
      while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) spec += f[i++];
    }
    if (i >= f.size()) eval_fail("incomplete format");
    char conv = f[i];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (next >= pos.size()) eval_fail("not enough arguments for format string");
      arg = &pos[next++];
    }
    char buf[512];
    if (spec.size() > 8) eval_fail("format spec too long");
    switch (conv) {
      case 's':
      case 'r': {
        std::string s = conv == 's' ? to_str(*arg) : repr(*arg);
        int width = 0;
        size_t k = 1;
        bool left = false;
        while (k < spec.size() && std::strchr("-+ #0", spec[k])) left |= spec[k++] == '-';
        width = std::atoi(spec.c_str() + k);
        size_t len = utf8_length(s);
        std::string pad = size_t(width) > len ? std::string(size_t(width) - len, ' ') : "";
        out += left ? s + pad : pad + s;
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
        if (!arg->is_number()) eval_fail(fmt::format("%{} format: a number is required, not '{}'", conv, type_name(*arg)));
        std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(),
                      static_cast<long long>(arg->kind() == Value::Kind::Float ? int64_t(arg->as_float()) : arg->as_int()));
        out += buf;
        break;
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        if (!arg->is_number()) eval_fail(fmt::format("%{} format: a number is required, not '{}'", conv, type_name(*arg)));
        std::snprintf(buf, sizeof buf, (spec + conv).c_str(), arg->as_float());
        out += buf;
        break;
      default: eval_fail(fmt::format("unsupported format character '{}'", conv));
    }
    in.check_string_size(out.size());
  }
  if (!named && next < pos.size()) eval_fail("not all arguments converted during string formatting");
  return out;
}

}  // namespace memra::chat::jinja

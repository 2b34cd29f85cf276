// Values of the Jinja interpreter: the Python objects a chat template sees (None, bool, int,
// float, str, list/tuple, dict, namespace, callables, the loop object, Undefined), with Python's
// semantics for truthiness, str(), repr(), ==, < and json.dumps.
//
// Containers are shared and, except namespaces, immutable once built: transformers renders in
// an ImmutableSandboxedEnvironment, where list.append / dict.update are refused, so copying a
// Value is a reference-count bump and cycles can only pass through a namespace. Every recursive
// walk (repr, ==, tojson) stops at namespaces or is bounded by a depth limit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace memra::chat::jinja {

// A runtime error inside the template. The interpreter turns it into a TemplateError that
// carries the line being evaluated.
struct EvalFailure {
  std::string message;
};
[[noreturn]] void eval_fail(std::string message);

class Value;
class Interp;
struct CallArgs;
struct LoopObj;

// Nesting of lists and dicts is bounded when they are built (a template could otherwise grow a
// chain a million levels deep through a namespace, and freeing it would recurse as deep).
constexpr uint32_t kMaxValueNesting = 256;

struct ListObj {
  std::vector<Value> items;
  bool tuple = false;  // only changes repr(): (a, b) instead of [a, b]
  uint32_t depth = 1;  // containers nested inside, this one included
};

// Insertion-ordered dict with string keys (JSON objects and Jinja dict literals).
class DictObj {
 public:
  const Value* find(std::string_view key) const;
  void set(std::string key, Value value);
  size_t size() const { return items_.size(); }
  uint32_t depth() const { return depth_; }
  void clear() {
    items_.clear();
    index_.clear();
  }
  const std::vector<std::pair<std::string, Value>>& items() const { return items_; }

 private:
  std::vector<std::pair<std::string, Value>> items_;
  std::unordered_map<std::string, size_t> index_;  // built once the dict is large
  uint32_t depth_ = 1;
};

struct FunctionObj {
  std::string name;
  std::function<Value(Interp&, CallArgs&)> call;
};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Function, Loop };

  Value() = default;  // Undefined without a hint
  static Value undefined(std::string hint);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s, bool markup = false);
  static Value list(std::vector<Value> items, bool tuple = false);
  static Value dict(DictObj d);
  static Value ns(DictObj d);
  static Value function(std::string name, std::function<Value(Interp&, CallArgs&)> fn);
  static Value loop(std::shared_ptr<LoopObj> l);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::List; }
  bool is_dict() const { return kind_ == Kind::Dict; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_markup() const { return markup_; }

  bool as_bool() const { return b_; }
  int64_t as_int() const { return kind_ == Kind::Bool ? int64_t(b_) : i_; }  // Bool or Int
  double as_float() const;                                                 // any number
  const std::string& as_str() const { return *static_cast<const std::string*>(p_.get()); }
  const ListObj& as_list() const { return *static_cast<const ListObj*>(p_.get()); }
  const DictObj& as_dict() const { return *static_cast<const DictObj*>(p_.get()); }  // Dict or Namespace
  DictObj& as_ns() const { return *static_cast<DictObj*>(p_.get()); }
  const FunctionObj& as_func() const { return *static_cast<const FunctionObj*>(p_.get()); }
  LoopObj& as_loop() const { return *static_cast<LoopObj*>(p_.get()); }
  const void* identity() const { return p_.get(); }
  // Why this value is undefined ("'x' is undefined"), for the error raised when it is used.
  std::string undefined_hint() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool markup_ = false;
  union {
    bool b_;
    int64_t i_ = 0;
    double f_;
  };
  std::shared_ptr<void> p_;
};

// Python-ish type name for messages ("str", "list", "dict", ...).
const char* type_name(const Value& v);

bool truthy(const Value& v);
// str(v) as Jinja prints it (Undefined prints as the empty string).
std::string to_str(const Value& v);
std::string repr(const Value& v);
// Python ==, with 1 == 1.0 == True.
bool equals(const Value& a, const Value& b);
// Python ordering: numbers, strings (code point order) and lists; anything else fails.
int compare(const Value& a, const Value& b);

// Python json.dumps(x, ensure_ascii, indent, separators, sort_keys), which transformers
// installs as the `tojson` filter.
struct JsonStyle {
  bool ensure_ascii = false;
  bool sort_keys = false;
  bool pretty = false;        // indent given
  std::string indent;         // per level, when pretty
  std::string item_sep = ", ";
  std::string key_sep = ": ";
};
void dump_json(const Value& v, const JsonStyle& style, std::string& out);

// JSON input (request bodies) -> Values. Key order is kept. Nesting is limited.
Value from_json(const nlohmann::ordered_json& j);

}  // namespace memra::chat::jinja

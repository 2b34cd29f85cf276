// The tree-walking evaluator of the Jinja interpreter (internal to src/chat).
//
// Scoping follows Jinja: the template's top level is one scope; each for-loop iteration, macro
// call, `with` block and block `set` body gets a child scope, so `set` inside a loop does not
// leak out (that is what namespace() is for). Scopes live on the C++ stack; a macro keeps a
// pointer to the scope it was defined in and checks that it is still alive when called.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace memra::chat::jinja {

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

// Binds call arguments to named parameters, Python style. `what` names the callee in errors.
// Returns one pointer per parameter (null when not given).
std::vector<const Value*> bind_args(const CallArgs& args, std::string_view what,
                                    std::initializer_list<std::string_view> params);

struct Frame {
  Frame* parent = nullptr;
  std::vector<std::pair<std::string, Value>> vars;
  size_t level = 0;     // index in the interpreter's stack of live scopes
  uint64_t serial = 0;  // unique per scope, to tell a live scope from a dead one at the same address
};

// The `loop` variable. It may outlive its loop (stored in a namespace), so it owns the items.
struct LoopObj {
  std::shared_ptr<const std::vector<Value>> items;
  size_t index0 = 0;
  int depth0 = 0;
  const Stmt* stmt = nullptr;  // the for statement, for recursive loop(...) calls
  Frame* home = nullptr;       // the scope the for statement runs in (checked alive before use)
  size_t home_level = 0;
  uint64_t home_serial = 0;
  Value last_changed;
  bool has_changed = false;
};

class Interp {
 public:
  explicit Interp(const Limits& limits) : limits_(limits) {}
  // Empties every namespace the render created: namespaces are the only mutable values, so
  // this breaks any reference cycle a template built through them (e.g. ns.self = ns).
  ~Interp();
  Interp(const Interp&) = delete;
  Interp& operator=(const Interp&) = delete;

  // Runs `body` in the root scope `vars`, appending to `out`.
  void run(const Body& body, std::vector<std::pair<std::string, Value>> vars, std::string& out);
  int line() const { return line_; }

  // ---- used by the builtins ----
  [[noreturn]] void fail(const std::string& message) const;
  void charge(uint64_t units);
  void charge_elements(size_t n) { charge(uint64_t(n) * 8); }
  void charge_bytes(size_t n) { charge(uint64_t(n) / 4); }
  // Fails when a string about to be built would exceed the output limit.
  void check_string_size(size_t bytes) const;
  void check_list_size(size_t items) const;
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  Value call_value(const Value& callee, CallArgs& args);
  // Elements a for loop (or a filter) walks: list items, dict keys, string characters.
  std::vector<Value> iterate(const Value& v);
  // The names a template may use without defining them (range, namespace, raise_exception...).
  Value global(const std::string& name);
  Value new_namespace(DictObj attrs);

 private:
  enum class Flow { Normal, Break, Continue };

  const Limits& limits_;
  uint64_t work_ = 0;
  int line_ = 1;
  int call_depth_ = 0;
  int recursion_ = 0;
  uint64_t next_serial_ = 1;
  Frame* frame_ = nullptr;
  std::vector<Frame*> stack_;
  std::string* out_ = nullptr;
  const Value* block_value_ = nullptr;
  std::vector<Value> namespaces_;

  struct Scope;
  struct Capture;
  struct RecursionGuard;

  void write(std::string_view s);
  Value lookup(const std::string& name);
  void assign(const std::string& name, Value v);
  void unpack(const std::vector<std::string>& targets, const Value& v);

  Flow exec(const Body& body);
  Flow exec_stmt(const Stmt& s);
  void exec_for(const Stmt& s, const Value& iterable, int depth0, Frame* home);
  void define_macro(const Stmt& s);
  Value call_macro(const Stmt& m, Frame* home, uint64_t home_serial, CallArgs& args);
  std::string render_block(const Body& body, bool own_scope);
  Value apply_block_filters(const Expr* chain, std::string text);

  Value eval(const Expr& e);
  Value eval_call(const Expr& e);
  Value eval_binary(const std::string& op, const Value& a, const Value& b);
  Value eval_compare(const Expr& e);
  Value eval_slice(const Value& obj, const Expr& slice);
  CallArgs eval_args(const std::vector<Arg>& args);
  Value loop_attr(const Value& loop, const std::string& name);
};

// Builtins (jinja_filters.cpp, jinja_methods.cpp).
Value apply_filter(Interp& in, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Interp& in, const std::string& name, const Value& input, CallArgs& args);
// str / dict / list methods: sets `found` false when `obj` has no method `name`.
Value call_method(Interp& in, const Value& obj, const std::string& name, CallArgs& args, bool& found);
bool has_method(const Value& obj, const std::string& name);
// Python's `format % args` for str (%s %d %i %f %r %x %%).
std::string percent_format(Interp& in, const std::string& fmt, const Value& args);

}  // namespace memra::chat::jinja

// A Jinja2 interpreter for chat templates (tokenizer.chat_template in GGUF files).
//
// It renders the way Hugging Face transformers' apply_chat_template does: an
// ImmutableSandboxedEnvironment with trim_blocks=True, lstrip_blocks=True, the loop-controls
// extension (break/continue), `tojson` replaced by json.dumps(ensure_ascii=False, ...), and the
// globals raise_exception(msg) and strftime_now(fmt). Newlines in the template are normalised to
// "\n" and one trailing newline is dropped, as Jinja does by default.
//
// Supported: {{ }}, {% %}, {# #}, whitespace control (- and +), raw, if/elif/else, for (else,
// `if` filter, tuple targets, recursive, loop.*), set (incl. block set and namespace attributes),
// with, macro, filter blocks, generation blocks (rendered as plain content), Python operators,
// slicing, str/dict methods, and the common filters and tests. Not supported (a clear error):
// call blocks, include/import/extends/block, *args/**kwargs.
//
// Rendering is bounded: output size, total work (node evaluations, loop iterations, copied
// elements) and nesting depth are capped, so a hostile template ends with a TemplateError rather
// than hanging or exhausting memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace memra::chat::jinja {

// Syntax and runtime errors of a template; messages name the template line.
class TemplateError : public Error {
 public:
  using Error::Error;
};

struct Limits {
  size_t max_output_bytes = size_t(16) << 20;  // the rendered text, and any single string value
  size_t max_list_items = size_t(1) << 20;     // any single list (range(), repetition, concatenation)
  uint64_t max_work = 50'000'000;              // abstract steps; about a second of CPU time
  int max_call_depth = 64;                     // nested macro calls
};

struct Program;  // the parsed template (jinja_ast.h)

class Template {
 public:
  // Parses `source`; throws TemplateError ("chat template syntax error at line N: ...").
  explicit Template(std::string_view source);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  // Renders with the top-level variables in `vars` (a JSON object; key order is kept, which
  // matters to `tojson`). Throws TemplateError.
  std::string render(const nlohmann::ordered_json& vars, const Limits& limits = {}) const;

 private:
  std::shared_ptr<const Program> program_;
};

}  // namespace memra::chat::jinja

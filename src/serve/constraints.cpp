#include "serve/constraints.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/regex.h"
#include "grammar/tool_calls.h"
#include "serve/openai_api.h"

namespace memra::serve {

namespace {

const ojson* present(const ojson& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// The JSON schema of a guided_json-style field: an object, or a string holding one.
ojson schema_of(const ojson& v, const std::string& param) {
  if (v.is_object() || v.is_boolean()) return v;
  if (v.is_string()) {
    if (json_depth(v.get<std::string>()) > kMaxJsonDepth)
      throw bad(param, fmt::format("'{}' nests JSON deeper than {} levels", param, kMaxJsonDepth));
    ojson j = ojson::parse(v.get<std::string>(), nullptr, false);
    if (!j.is_discarded() && (j.is_object() || j.is_boolean())) return j;
  }
  throw bad(param, fmt::format("'{}' must be a JSON schema (an object, or a string holding one)", param));
}

std::string string_of(const ojson& v, const std::string& param) {
  if (!v.is_string()) throw bad(param, fmt::format("'{}' must be a string", param));
  return v.get<std::string>();
}

grammar::Grammar choice_grammar(const ojson& v, const std::string& param) {
  if (!v.is_array() || v.empty()) throw bad(param, fmt::format("'{}' must be a non-empty array of strings", param));
  grammar::Grammar g;
  std::vector<int32_t> alts;
  for (const auto& c : v) {
    if (!c.is_string() || c.get<std::string>().empty())
      throw bad(param, fmt::format("'{}' entries must be non-empty strings", param));
    alts.push_back(g.literal(c.get<std::string>()));
  }
  const int32_t root = g.add_rule("root");
  g.define(root, g.alt(std::move(alts)));
  g.set_root(root);
  return g;
}

struct Found {
  std::string param;
  std::function<grammar::Grammar()> build;
  bool tool_calls = false;
};

}  // namespace

Constraint parse_constraint(const ojson& req, const ModelInfo& model, bool chat) {
  std::vector<Found> found;
  auto add = [&](std::string param, std::function<grammar::Grammar()> build, bool tools = false) {
    found.push_back({std::move(param), std::move(build), tools});
  };

  static const char* kRefused[] = {"guided_whitespace_pattern", "structural_tag", "regex", "ebnf"};
  static const char* kKnownGuided[] = {"guided_json", "guided_regex", "guided_choice", "guided_grammar",
                                       "guided_decoding_backend"};
  for (auto it = req.begin(); it != req.end(); ++it) {
    const std::string& k = it.key();
    for (const char* r : kRefused)
      if (k == r) throw bad(k, fmt::format("'{}' is not supported by this server; supported constraints: response_format, "
                                            "tool_choice, grammar, json_schema, guided_json, guided_regex, guided_choice, "
                                            "guided_grammar, structured_outputs", k));
    if (k.rfind("guided_", 0) == 0 &&
        std::none_of(std::begin(kKnownGuided), std::end(kKnownGuided), [&](const char* x) { return k == x; }))
      throw bad(k, fmt::format("unknown constraint field '{}' (supported: guided_json, guided_regex, guided_choice, "
                               "guided_grammar)", k));
  }
  if (const ojson* v = present(req, "guided_decoding_backend"); v && !v->is_string())
    throw bad("guided_decoding_backend", "'guided_decoding_backend' must be a string");

  if (const ojson* v = present(req, "guided_json")) {
    ojson s = schema_of(*v, "guided_json");
    add("guided_json", [s] { return grammar::json_schema_grammar(s); });
  }
  if (const ojson* v = present(req, "json_schema")) {
    ojson s = schema_of(*v, "json_schema");
    add("json_schema", [s] { return grammar::json_schema_grammar(s); });
  }
  if (const ojson* v = present(req, "guided_regex")) {
    std::string p = string_of(*v, "guided_regex");
    add("guided_regex", [p] { return grammar::regex_grammar(p); });
  }
  if (const ojson* v = present(req, "guided_choice")) {
    ojson c = *v;
    add("guided_choice", [c] { return choice_grammar(c, "guided_choice"); });
  }
  for (const char* key : {"grammar", "guided_grammar"}) {
    if (const ojson* v = present(req, key)) {
      std::string text = string_of(*v, key);
      add(key, [text] { return grammar::parse_gbnf(text); });
    }
  }
  if (const ojson* so = present(req, "structured_outputs")) {
    if (!so->is_object()) throw bad("structured_outputs", "'structured_outputs' must be an object");
    for (auto it = so->begin(); it != so->end(); ++it) {
      const std::string param = "structured_outputs." + it.key();
      if (it->is_null()) continue;
      if (it.key() == "json") {
        ojson s = schema_of(*it, param);
        add(param, [s] { return grammar::json_schema_grammar(s); });
      } else if (it.key() == "regex") {
        std::string p = string_of(*it, param);
        add(param, [p] { return grammar::regex_grammar(p); });
      } else if (it.key() == "choice") {
        ojson c = *it;
        add(param, [c, param] { return choice_grammar(c, param); });
      } else if (it.key() == "grammar") {
        std::string text = string_of(*it, param);
        add(param, [text] { return grammar::parse_gbnf(text); });
      } else {
        throw bad(param, fmt::format("unknown constraint field '{}' (supported: json, regex, choice, grammar)", param));
      }
    }
  }
  if (const ojson* rf = present(req, "response_format")) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string())
      throw bad("response_format", "'response_format' must be an object with a string 'type'");
    const std::string type = (*rf)["type"].get<std::string>();
    if (!chat) throw bad("response_format", "'response_format' applies to /v1/chat/completions; use guided_json here");
    if (type == "json_object") {
      add("response_format", [] { return grammar::any_json_grammar(); });
    } else if (type == "json_schema") {
      const ojson* js = present(*rf, "json_schema");
      if (!js || !js->is_object())
        throw bad("response_format", "response_format type 'json_schema' needs a 'json_schema' object");
      const ojson* s = present(*js, "schema");
      if (!s) throw bad("response_format", "'response_format.json_schema.schema' is required");
      if (const ojson* st = present(*js, "strict"); st && !st->is_boolean())
        throw bad("response_format", "'response_format.json_schema.strict' must be a boolean");
      ojson schema = schema_of(*s, "response_format");
      add("response_format", [schema] { return grammar::json_schema_grammar(schema); });
    } else if (type != "text") {
      throw bad("response_format",
                fmt::format("response_format type '{}' is not supported; use 'text', 'json_object' or 'json_schema'", type));
    }
  }
  if (chat) {
    if (const ojson* tc = present(req, "tool_choice")) {
      const ojson* tools = present(req, "tools");
      const bool required = tc->is_string() && tc->get<std::string>() == "required";
      std::string named;
      if (tc->is_object()) {
        if (!tc->contains("function") || !(*tc)["function"].is_object() || !(*tc)["function"].contains("name") ||
            !(*tc)["function"]["name"].is_string())
          throw bad("tool_choice", "a named 'tool_choice' must be {\"type\": \"function\", \"function\": {\"name\": ...}}");
        named = (*tc)["function"]["name"].get<std::string>();
      }
      if (required || !named.empty()) {
        if (!tools || tools->empty())
          throw bad("tool_choice", "'tool_choice' asks for a tool call but the request has no 'tools'");
        ojson chosen = ojson::array();
        for (const auto& t : *tools)
          if (named.empty() || t["function"]["name"] == named) chosen.push_back(t);
        if (chosen.empty()) throw bad("tool_choice", fmt::format("'tool_choice' names '{}', which is not in 'tools'", named));
        const auto format = model.xml_tool_calls ? grammar::ToolCallFormat::Xml : grammar::ToolCallFormat::Json;
        const bool one = !named.empty();
        add("tool_choice", [chosen, format, one] { return grammar::tool_call_grammar(chosen, format, one); }, true);
      }
    }
  }

  Constraint out;
  if (found.empty()) return out;
  if (found.size() > 1)
    throw bad(found[1].param, fmt::format("only one constraint may be given per request, got '{}' and '{}'",
                                          found[0].param, found[1].param));
  out.source = found[0].param;
  out.tool_calls = found[0].tool_calls;
  try {
    out.grammar = grammar::CompiledGrammar::compile(found[0].build());
  } catch (const grammar::GrammarError& e) {
    throw bad(out.source, fmt::format("'{}': {}", out.source, e.what()));
  } catch (const nlohmann::json::exception& e) {
    throw bad(out.source, fmt::format("'{}': malformed schema ({})", out.source, e.what()));
  }
  return out;
}

}  // namespace memra::serve

#include "grammar/json_schema.h"

#include <cmath>
#include <set>
#include <unordered_map>

#include "grammar/json_exclude.h"
#include "grammar/json_numbers.h"
#include "grammar/regex.h"
#include "grammar/text_parse.h"

namespace memra::grammar {

using ojson = nlohmann::ordered_json;

namespace {

const std::set<std::string, std::less<>> kAnnotations = {
    "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
    "writeOnly", "$anchor", "contentEncoding", "contentMediaType", "example", "discriminator", "x-order"};
const std::set<std::string, std::less<>> kSupported = {
    "type", "properties", "required", "additionalProperties", "enum", "const", "items", "prefixItems", "minItems",
    "maxItems", "anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "minLength", "maxLength", "pattern",
    "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "nullable", "minProperties",
    "maxProperties", "uniqueItems", "unevaluatedProperties", "additionalItems", "not"};
const std::set<std::string, std::less<>> kRefused = {
    "if", "then", "else", "patternProperties", "propertyNames", "dependentRequired",
    "dependentSchemas", "dependencies", "contains", "minContains", "maxContains", "unevaluatedItems",
    "$dynamicRef", "$recursiveRef"};

std::string child_path(const std::string& path, const std::string& key) { return path + "/" + key; }

}  // namespace

class JsonSchemaCompiler {
 public:
  JsonSchemaCompiler(Grammar& g, const ojson& doc) : g_(g), doc_(doc) {}

  int32_t value(const ojson& schema, const std::string& path, int depth) {
    if (depth > g_.limits().max_nesting)
      grammar_fail("json_schema: nesting deeper than {} levels at {}", g_.limits().max_nesting, path);
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) grammar_fail("json_schema: schema 'false' at {} matches nothing", path);
      return g_.ref(any_value_rule());
    }
    if (!schema.is_object()) grammar_fail("json_schema: the schema at {} must be an object or a boolean", path);
    check_keywords(schema, path);
    if (schema.contains("$ref")) {
      if (schema.size() > 1 && has_constraints_besides(schema, "$ref"))
        return value(merge_all(schema, path, depth), path, depth + 1);
      return g_.ref(ref_rule(schema["$ref"], path, depth));
    }
    if (schema.contains("allOf")) return value(merge_all(schema, path, depth), path, depth + 1);
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!schema.contains(key)) continue;
      const ojson& alts = schema[key];
      if (!alts.is_array() || alts.empty()) grammar_fail("json_schema: '{}' at {} must be a non-empty array", key, path);
      ojson base = schema;
      base.erase(key);
      const bool plain = !has_constraints(base);
      std::vector<int32_t> exprs;
      for (size_t i = 0; i < alts.size(); ++i) {
        const std::string p = child_path(child_path(path, key), std::to_string(i));
        if (plain) exprs.push_back(value(alts[i], p, depth + 1));
        else exprs.push_back(value(merge(base, resolve(alts[i], p), p), p, depth + 1));
      }
      return g_.alt(std::move(exprs));
    }
    if (schema.contains("nullable") && schema["nullable"] == true) {
      ojson rest = schema;
      rest.erase("nullable");
      return g_.alt({value(rest, path, depth + 1), g_.literal("null")});
    }
    if (schema.contains("not")) return value_excluding(schema, path, depth);
    if (schema.contains("const")) return g_.literal(schema["const"].dump());
    if (schema.contains("enum")) {
      const ojson& e = schema["enum"];
      if (!e.is_array() || e.empty()) grammar_fail("json_schema: 'enum' at {} must be a non-empty array", path);
      std::vector<int32_t> alts;
      std::set<std::string> seen;
      for (const auto& v : e)
        if (seen.insert(v.dump()).second) alts.push_back(g_.literal(v.dump()));
      return g_.alt(std::move(alts));
    }
    const std::vector<std::string> types = types_of(schema, path);
    if (types.empty()) return g_.ref(any_value_rule());
    std::vector<int32_t> alts;
    for (const std::string& t : types) {
      if (t == "string") alts.push_back(string_value(schema, path));
      else if (t == "integer") alts.push_back(number_value(schema, path, true));
      else if (t == "number") alts.push_back(number_value(schema, path, false));
      else if (t == "boolean") alts.push_back(g_.alt({g_.literal("true"), g_.literal("false")}));
      else if (t == "null") alts.push_back(g_.literal("null"));
      else if (t == "object") alts.push_back(object_value(schema, path, depth));
      else if (t == "array") alts.push_back(array_value(schema, path, depth));
      else grammar_fail("json_schema: unknown type '{}' at {}", t, path);
    }
    return g_.alt(std::move(alts));
  }

  // The types the schema allows, from 'type' or inferred from its keywords; empty: any value.
  static std::vector<std::string> types_of(const ojson& schema, const std::string& path) {
    std::vector<std::string> types;
    if (schema.contains("type")) {
      const ojson& t = schema["type"];
      if (t.is_string()) types.push_back(t.get<std::string>());
      else if (t.is_array())
        for (const auto& x : t) {
          if (!x.is_string()) grammar_fail("json_schema: 'type' at {} must hold strings", path);
          types.push_back(x.get<std::string>());
        }
      else grammar_fail("json_schema: 'type' at {} must be a string or an array of strings", path);
      if (types.empty()) grammar_fail("json_schema: 'type' at {} is an empty list", path);
      return types;
    }
    if (schema.contains("properties") || schema.contains("required") || schema.contains("additionalProperties"))
      types.push_back("object");
    else if (schema.contains("items") || schema.contains("prefixItems") || schema.contains("minItems") || schema.contains("maxItems"))
      types.push_back("array");
    else if (schema.contains("pattern") || schema.contains("format") || schema.contains("minLength") || schema.contains("maxLength"))
      types.push_back("string");
    else if (schema.contains("minimum") || schema.contains("maximum") || schema.contains("exclusiveMinimum") || schema.contains("exclusiveMaximum") || schema.contains("multipleOf"))
      types.push_back("number");
    return types;
  }

  // What a 'not' excludes: whole types, and single values (const / enum).
  struct Exclusion {
    std::set<std::string> types;
    std::vector<ojson> values;
  };

  // Collects the exclusions of `n` (the schema under 'not'). Supported: type, const, enum (with or
  // without a type that filters them) and anyOf of those; anything else has no exact grammar in
  // general (the complement of a pattern, of an object shape, ...) and is refused.
  void collect_not(const ojson& n_in, const std::string& path, Exclusion& ex, int depth) const {
    if (depth > g_.limits().max_nesting) grammar_fail("json_schema: nesting deeper than {} levels at {}", g_.limits().max_nesting, path);
    if (n_in.is_boolean()) {
      if (n_in.get<bool>()) grammar_fail("json_schema: 'not: true' at {} matches nothing", path);
      return;
    }
    if (!n_in.is_object()) grammar_fail("json_schema: 'not' at {} must hold a schema", path);
    const ojson n = resolve(n_in, path);
    std::vector<std::string> types;
    bool has_values = false;
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string& k = it.key();
      if (kAnnotations.count(k) || k == "$defs" || k == "definitions") continue;
      if (k == "type") {
        types = types_of(n, path);
      } else if (k == "const" || k == "enum") {
        has_values = true;
      } else if (k == "anyOf") {
        if (!it.value().is_array()) grammar_fail("json_schema: 'anyOf' at {} must be an array", path);
        if (n.size() > 1 && has_constraints_besides(n, "anyOf"))
          grammar_fail("json_schema: unsupported keyword 'not' at {} (anyOf with siblings inside 'not')", path);
        for (size_t i = 0; i < it.value().size(); ++i)
          collect_not(it.value()[i], child_path(child_path(path, "anyOf"), std::to_string(i)), ex, depth + 1);
        return;
      } else {
        grammar_fail("json_schema: unsupported keyword 'not' at {} (only 'not' of type, const, enum and anyOf of "
                     "them is supported; '{}' inside 'not' has no exact grammar)", path, k);
      }
    }
    auto of_types = [&](const ojson& v) {
      if (types.empty()) return true;
      for (const std::string& t : types) {
        if ((t == "string" && v.is_string()) || (t == "boolean" && v.is_boolean()) || (t == "null" && v.is_null()) ||
            (t == "object" && v.is_object()) || (t == "array" && v.is_array()) || (t == "number" && v.is_number()) ||
            (t == "integer" && v.is_number() && std::floor(v.get<double>()) == v.get<double>()))
          return true;
      }
      return false;
    };
    if (has_values) {
      if (n.contains("const") && of_types(n["const"])) ex.values.push_back(n["const"]);
      if (n.contains("enum")) {
        if (!n["enum"].is_array()) grammar_fail("json_schema: 'enum' at {} must be an array", path);
        for (const auto& v : n["enum"])
          if (of_types(v)) ex.values.push_back(v);
      }
      return;
    }
    for (const std::string& t : types) ex.types.insert(t);
  }

  // A schema with 'not': its types minus the excluded ones, each minus the excluded values.
  int32_t value_excluding(const ojson& schema, const std::string& path, int depth) {
    Exclusion ex;
    collect_not(schema["not"], child_path(path, "not"), ex, depth + 1);
    ojson rest = schema;
    rest.erase("not");
    auto excluded = [&](const ojson& v) {
      for (const ojson& x : ex.values)
        if (x == v) return true;
      if (ex.types.count("number") && v.is_number()) return true;
      if (ex.types.count("integer") && v.is_number() && std::floor(v.get<double>()) == v.get<double>()) return true;
      return (ex.types.count("string") && v.is_string()) || (ex.types.count("boolean") && v.is_boolean()) ||
             (ex.types.count("null") && v.is_null()) || (ex.types.count("object") && v.is_object()) ||
             (ex.types.count("array") && v.is_array());
    };
    if (rest.contains("const")) {
      if (excluded(rest["const"])) grammar_fail("json_schema: 'not' at {} excludes the only value ('const')", path);
      return value(rest, path, depth + 1);
    }
    if (rest.contains("enum")) {
      if (!rest["enum"].is_array()) grammar_fail("json_schema: 'enum' at {} must be a non-empty array", path);
      ojson kept = ojson::array();
      for (const auto& v : rest["enum"])
        if (!excluded(v)) kept.push_back(v);
      if (kept.empty()) grammar_fail("json_schema: 'not' at {} excludes every value of 'enum'", path);
      rest["enum"] = kept;
      return value(rest, path, depth + 1);
    }
    std::vector<std::string> types = types_of(rest, path);
    const bool any = types.empty();
    if (any) types = {"object", "array", "string", "number", "boolean", "null"};
    std::vector<int32_t> alts;
    for (const std::string& t : types) {
      if (ex.types.count(t) || (t == "integer" && ex.types.count("number"))) continue;
      if (t == "number" && ex.types.count("integer"))
        grammar_fail("json_schema: unsupported keyword 'not' at {} (numbers that are not integers have no exact grammar "
                     "here; use type 'integer' or exclude 'number')", path);
      std::vector<std::string> strings;
      std::vector<int64_t> integers;
      bool other_numbers = false, bool_true = false, bool_false = false, null = false;
      for (const ojson& v : ex.values) {
        if (v.is_string()) strings.push_back(v.get<std::string>());
        else if (v.is_boolean()) (v.get<bool>() ? bool_true : bool_false) = true;
        else if (v.is_null()) null = true;
        else if (v.is_number()) {
          const double d = v.get<double>();
          if (std::floor(d) == d && std::abs(d) <= 9e15) integers.push_back(static_cast<int64_t>(d));
          else other_numbers = true;
        } else if ((t == "object" && v.is_object()) || (t == "array" && v.is_array())) {
          grammar_fail("json_schema: unsupported keyword 'not' at {} (excluding a single {} value has no exact grammar)", path, t);
        }
      }
      if (t == "string") {
        alts.push_back(strings.empty() ? string_value(rest, path) : string_value(rest, path, &strings));
      } else if (t == "integer" || t == "number") {
        if (t == "number" && (!integers.empty() || other_numbers))
          grammar_fail("json_schema: unsupported keyword 'not' at {} (excluding single values from type 'number' has no "
                       "exact grammar: 1, 1.0 and 10e-1 are one value; use type 'integer')", path);
        alts.push_back(integers.empty() ? number_value(rest, path, t == "integer") : integer_excluding(rest, path, integers));
      } else if (t == "boolean") {
        if (!bool_true) alts.push_back(g_.literal("true"));
        if (!bool_false) alts.push_back(g_.literal("false"));
      } else if (t == "null") {
        if (!null) alts.push_back(g_.literal("null"));
      } else if (t == "object") {
        alts.push_back(any ? g_.ref(any_object_rule()) : object_value(rest, path, depth));
      } else if (t == "array") {
        alts.push_back(any ? g_.ref(any_array_rule()) : array_value(rest, path, depth));
      } else {
        grammar_fail("json_schema: unknown type '{}' at {}", t, path);
      }
    }
    if (alts.empty()) grammar_fail("json_schema: 'not' at {} excludes every value the schema allows", path);
    return g_.alt(std::move(alts));
  }

  int32_t integer_excluding(const ojson& s, const std::string& path, const std::vector<int64_t>& excluded) {
    if (s.contains("multipleOf") && (!s["multipleOf"].is_number() || s["multipleOf"].get<double>() != 1.0))
      grammar_fail("json_schema: unsupported keyword 'multipleOf' at {} (only multipleOf 1 is supported)", path);
    const std::optional<int64_t> lo = bound(s, true, true, path), hi = bound(s, false, true, path);
    const int32_t rule = g_.add_rule(fmt::format("integer {}#{}", path, n_rules_made_++), true);
    g_.define(rule, integer_range_excluding(g_, lo, hi, excluded));
    return g_.ref(rule);
  }

  int32_t ws() {
    ByteSet s;
    s.set(' ');
    s.set('\t');
    s.set('\n');
    s.set('\r');
    return g_.repeat(g_.bytes(s), 0, -1);
  }

  int32_t any_value_rule() {
    if (any_value_ >= 0) return any_value_;
    any_value_ = g_.add_rule("json-value", true);
    const int32_t object = g_.add_rule("json-object", true);
    const int32_t array = g_.add_rule("json-array", true);
    auto member = [&] { return g_.seq({g_.ref(string_rule()), ws(), g_.literal(":"), ws(), g_.ref(any_value_)}); };
    g_.define(object, g_.seq({g_.literal("{"), ws(),
                              g_.repeat(g_.seq({member(), g_.repeat(g_.seq({ws(), g_.literal(","), ws(), member()}), 0, -1)}), 0, 1),
                              ws(), g_.literal("}")}));
    auto element = [&] { return g_.ref(any_value_); };
    g_.define(array, g_.seq({g_.literal("["), ws(),
                             g_.repeat(g_.seq({element(), g_.repeat(g_.seq({ws(), g_.literal(","), ws(), element()}), 0, -1)}), 0, 1),
                             ws(), g_.literal("]")}));
    g_.define(any_value_, g_.alt({g_.ref(object), g_.ref(array), g_.ref(string_rule()), g_.ref(number_rule()),
                                  g_.literal("true"), g_.literal("false"), g_.literal("null")}));
    any_object_ = object;
    any_array_ = array;
    return any_value_;
  }
  int32_t any_object_rule() {
    any_value_rule();
    return any_object_;
  }
  int32_t any_array_rule() {
    any_value_rule();
    return any_array_;
  }

 private:
  Grammar& g_;
  const ojson& doc_;
  std::unordered_map<std::string, int32_t> refs_;
  int32_t string_ = -1, number_ = -1, integer_ = -1, any_value_ = -1, any_object_ = -1, any_array_ = -1;
  int n_rules_made_ = 0;

  void check_keywords(const ojson& s, const std::string& path) const {
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string& k = it.key();
      if (kRefused.count(k)) grammar_fail("json_schema: unsupported keyword '{}' at {}", k, path);
    }
    if (s.contains("additionalItems") && s["additionalItems"] != false)
      grammar_fail("json_schema: unsupported keyword 'additionalItems' at {} (use prefixItems and items)", path);
  }

  static bool has_constraints_besides(const ojson& s, const char* except) {
    for (auto it = s.begin(); it != s.end(); ++it)
      if (it.key() != except && !kAnnotations.count(it.key()) && it.key() != "$defs" && it.key() != "definitions") return true;
    return false;
  }
  static bool has_constraints(const ojson& s) { return has_constraints_besides(s, ""); }

  const ojson& resolve_pointer(const std::string& ref, const std::string& path) const {
    if (ref == "#") return doc_;
    if (ref.rfind("#/", 0) != 0)
      grammar_fail("json_schema: $ref '{}' at {} is not supported (only references inside the schema, '#/...')", ref, path);
    try {
      return doc_.at(ojson::json_pointer(ref.substr(1)));
    } catch (const std::exception&) {
      grammar_fail("json_schema: $ref '{}' at {} does not resolve", ref, path);
    }
  }

  ojson resolve(const ojson& s, const std::string& path) const {
    if (s.is_object() && s.contains("$ref") && s["$ref"].is_string()) {
      const ojson& target = resolve_pointer(s["$ref"].get<std::string>(), path);
      if (s.size() == 1) return target;
      ojson rest = s;
      rest.erase("$ref");
      return merge(target, rest, path);
    }
    return s;
  }

  int32_t ref_rule(const ojson& ref, const std::string& path, int depth) {
    if (!ref.is_string()) grammar_fail("json_schema: '$ref' at {} must be a string", path);
    const std::string r = ref.get<std::string>();
    auto it = refs_.find(r);
    if (it != refs_.end()) return it->second;
    const ojson& target = resolve_pointer(r, path);
    const int32_t rule = g_.add_rule("ref " + r);
    refs_.emplace(r, rule);
    g_.define(rule, value(target, r, depth + 1));
    return rule;
  }

  // Merges two schemas that must both hold (allOf, or an anyOf branch with its siblings).
  static ojson merge(const ojson& a_in, const ojson& b_in, const std::string& path) {
    if (a_in.is_boolean() || b_in.is_boolean()) {
      const ojson& other = a_in.is_boolean() ? b_in : a_in;
      const ojson& boolean = a_in.is_boolean() ? a_in : b_in;
      if (!boolean.get<bool>()) grammar_fail("json_schema: allOf at {} contains 'false'", path);
      return other;
    }
    ojson out = a_in;
    for (auto it = b_in.begin(); it != b_in.end(); ++it) {
      const std::string& k = it.key();
      if (!out.contains(k)) {
        out[k] = it.value();
      } else if (k == "properties") {
        for (auto p = it.value().begin(); p != it.value().end(); ++p) {
          if (out[k].contains(p.key()) && out[k][p.key()] != p.value())
            out[k][p.key()] = merge(out[k][p.key()], p.value(), child_path(path, p.key()));
          else out[k][p.key()] = p.value();
        }
      } else if (k == "required") {
        for (const auto& r : it.value())
          if (std::find(out[k].begin(), out[k].end(), r) == out[k].end()) out[k].push_back(r);
      } else if (kAnnotations.count(k)) {
        continue;
      } else if (out[k] != it.value()) {
        grammar_fail("json_schema: cannot combine two different '{}' constraints at {} (allOf / anyOf with siblings)", k, path);
      }
    }
    return out;
  }

  ojson merge_all(const ojson& schema, const std::string& path, int depth) const {
    (void)depth;
    ojson base = schema;
    ojson parts = ojson::array();
    if (base.contains("allOf")) {
      if (!base["allOf"].is_array()) grammar_fail("json_schema: 'allOf' at {} must be an array", path);
      parts = base["allOf"];
      base.erase("allOf");
    }
    if (base.contains("$ref")) {
      parts.push_back(ojson{{"$ref", base["$ref"]}});
      base.erase("$ref");
    }
    ojson out = base;
    for (size_t i = 0; i < parts.size(); ++i) {
      const std::string p = child_path(child_path(path, "allOf"), std::to_string(i));
      ojson part = resolve(parts[i], p);
      if (part.is_object() && part.contains("allOf")) part = merge_all(part, p, depth + 1);
      out = merge(out, part, p);
    }
    return out;
  }

  int32_t string_rule() {
    if (string_ >= 0) return string_;
    string_ = g_.add_rule("json-string", true);
    ByteSet plain_ascii;
    CodepointSet plain;
    plain.add(0x20, 0x10FFFF);
    plain.add('"', '"');
    CodepointSet non_special;
    non_special.add(0x20, 0x21);
    non_special.add(0x23, 0x5B);
    non_special.add(0x5D, 0x10FFFF);
    ByteSet esc;
    for (char c : std::string("\"\\/bfnrt")) esc.set(static_cast<uint8_t>(c));
    ByteSet hex;
    hex.set_range('0', '9');
    hex.set_range('a', 'f');
    hex.set_range('A', 'F');
    const int32_t ch = g_.alt({g_.codepoints(non_special),
                               g_.seq({g_.literal("\\"), g_.alt({g_.bytes(esc), g_.seq({g_.literal("u"), g_.repeat(g_.bytes(hex), 4, 4)})})})});
    g_.define(string_, g_.seq({g_.literal("\""), g_.repeat(ch, 0, -1), g_.literal("\"")}));
    return string_;
  }

  int32_t number_rule() {
    if (number_ >= 0) return number_;
    number_ = g_.add_rule("json-number", true);
    g_.define(number_, any_number_expr(g_));
    return number_;
  }

  int32_t integer_rule() {
    if (integer_ >= 0) return integer_;
    integer_ = g_.add_rule("json-integer", true);
    g_.define(integer_, integer_range_expr(g_, std::nullopt, std::nullopt));
    return integer_;
  }

  static std::optional<int64_t> int_of(const ojson& s, const char* key, const std::string& path) {
    if (!s.contains(key)) return std::nullopt;
    if (!s[key].is_number()) grammar_fail("json_schema: '{}' at {} must be a number", key, path);
    const int64_t v = s[key].get<int64_t>();
    if (v < 0) grammar_fail("json_schema: '{}' at {} must not be negative", key, path);
    return v;
  }

  // `excluded`: values a 'not' removes (UTF-8).
  int32_t string_value(const ojson& s, const std::string& path, const std::vector<std::string>* excluded = nullptr) {
    const bool has_pattern = s.contains("pattern");
    const std::optional<int64_t> min_len = int_of(s, "minLength", path), max_len = int_of(s, "maxLength", path);
    std::string format;
    if (s.contains("format") && s["format"].is_string()) format = s["format"].get<std::string>();
    int32_t content = -1;
    std::vector<std::string> removed;  // the excluded values the length bounds do not already rule out
    if (excluded) {
      for (const std::string& x : *excluded) {
        int64_t n = 0;
        for (unsigned char c : x) n += (c & 0xC0) != 0x80;
        if (n >= min_len.value_or(0) && (!max_len || n <= *max_len)) removed.push_back(x);
      }
    }
    if (!removed.empty()) {
      if (has_pattern || (!format.empty() && string_format_expr(g_, format) >= 0))
        grammar_fail("json_schema: unsupported keyword 'not' at {} (excluding values from a string with a 'pattern' or "
                     "'format' is not supported)", path);
      if (min_len.value_or(0) > g_.limits().max_repeat || max_len.value_or(0) > g_.limits().max_repeat)
        grammar_fail("json_schema: minLength/maxLength above {} at {} is not supported", g_.limits().max_repeat, path);
      content = string_content_excluding(g_, removed, min_len.value_or(0), max_len ? *max_len : -1);
    } else if (has_pattern) {
      if (!s["pattern"].is_string()) grammar_fail("json_schema: 'pattern' at {} must be a string", path);
      if (min_len || max_len)
        grammar_fail("json_schema: unsupported keyword combination 'pattern' with 'minLength'/'maxLength' at {}", path);
      content = regex_expr(g_, s["pattern"].get<std::string>(), RegexTarget::JsonString);
    } else if (!format.empty() && (content = string_format_expr(g_, format)) >= 0) {
      if (min_len || max_len)
        grammar_fail("json_schema: unsupported keyword combination 'format' with 'minLength'/'maxLength' at {}", path);
    } else if (min_len || max_len) {
      const int64_t lo = min_len.value_or(0);
      const int64_t hi = max_len ? *max_len : -1;
      if (hi >= 0 && hi < lo) grammar_fail("json_schema: maxLength < minLength at {}", path);
      if (lo > g_.limits().max_repeat || hi > g_.limits().max_repeat)
        grammar_fail("json_schema: minLength/maxLength above {} at {} is not supported", g_.limits().max_repeat, path);
      CodepointSet any;
      any.add(0, 0x10FFFF);
      content = g_.repeat(json_string_chars(g_, any), static_cast<int32_t>(lo), static_cast<int32_t>(hi));
    } else {
      return g_.ref(string_rule());
    }
    const int32_t rule = g_.add_rule(fmt::format("string {}", path), true);
    g_.define(rule, g_.seq({g_.literal("\""), content, g_.literal("\"")}));
    return g_.ref(rule);
  }

  // Bound as an integer the value must be >= (lower) or <= (upper), or nullopt.
  static std::optional<int64_t> bound(const ojson& s, bool lower, bool integer_type, const std::string& path) {
    std::optional<int64_t> out;
    auto tighten = [&](double v, bool exclusive) {
      if (!std::isfinite(v)) return;
      if (std::abs(v) > 9e15) grammar_fail("json_schema: numeric bound {} at {} is too large", v, path);
      int64_t b;
      if (lower) b = exclusive ? static_cast<int64_t>(std::floor(v)) + 1 : static_cast<int64_t>(std::ceil(v));
      else b = exclusive ? static_cast<int64_t>(std::ceil(v)) - 1 : static_cast<int64_t>(std::floor(v));
      (void)integer_type;
      if (!out) out = b;
      else out = lower ? std::max(*out, b) : std::min(*out, b);
    };
    const char* inclusive = lower ? "minimum" : "maximum";
    const char* exclusive = lower ? "exclusiveMinimum" : "exclusiveMaximum";
    if (s.contains(inclusive)) {
      if (!s[inclusive].is_number()) grammar_fail("json_schema: '{}' at {} must be a number", inclusive, path);
      tighten(s[inclusive].get<double>(), false);
    }
    if (s.contains(exclusive)) {
      const ojson& e = s[exclusive];
      if (e.is_boolean()) {  // draft 4: modifies minimum / maximum
        if (e.get<bool>() && s.contains(inclusive)) {
          out.reset();
          tighten(s[inclusive].get<double>(), true);
        }
      } else if (e.is_number()) {
        tighten(e.get<double>(), true);
      } else {
        grammar_fail("json_schema: '{}' at {} must be a number", exclusive, path);
      }
    }
    return out;
  }

  int32_t number_value(const ojson& s, const std::string& path, bool integer) {
    if (s.contains("multipleOf")) {
      // Only the multiples of 1 (integers): a common way to say "whole number".
      const ojson& m = s["multipleOf"];
      if (!m.is_number() || m.get<double>() != 1.0)
        grammar_fail("json_schema: unsupported keyword 'multipleOf' at {} (only multipleOf 1 is supported)", path);
      integer = true;
    }
    const std::optional<int64_t> lo = bound(s, true, integer, path), hi = bound(s, false, integer, path);
    if (!lo && !hi) return g_.ref(integer ? integer_rule() : number_rule());
    if (lo && hi && *lo > *hi)
      grammar_fail("json_schema: no {} lies within the bounds at {} (only integer-valued bounds are exact for numbers)",
                   integer ? "integer" : "number", path);
    const int32_t rule = g_.add_rule(fmt::format("{} {}", integer ? "integer" : "number", path), true);
    g_.define(rule, integer ? integer_range_expr(g_, lo, hi) : number_range_expr(g_, lo, hi));
    return g_.ref(rule);
  }

  // A value used in several places of the grammar: compiled once, as a rule (inlined again by the
  // compiler when it is small).
  int32_t shared_value(const ojson& schema, const std::string& path, int depth, bool keep = false) {
    const int32_t rule = g_.add_rule(fmt::format("value {}#{}", path, n_rules_made_++), keep);
    g_.define(rule, value(schema, path, depth + 1));
    return rule;
  }

  int32_t object_value(const ojson& s, const std::string& path, int depth) {
    std::vector<std::string> names;
    std::vector<const ojson*> schemas;
    std::vector<char> required;
    static const ojson kAny = true;
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) grammar_fail("json_schema: 'properties' at {} must be an object", path);
      for (auto it = s["properties"].begin(); it != s["properties"].end(); ++it) {
        names.push_back(it.key());
        schemas.push_back(&it.value());
        required.push_back(0);
      }
    }
    if (s.contains("required")) {
      if (!s["required"].is_array()) grammar_fail("json_schema: 'required' at {} must be an array", path);
      for (const auto& r : s["required"]) {
        if (!r.is_string()) grammar_fail("json_schema: 'required' at {} must hold strings", path);
        auto it = std::find(names.begin(), names.end(), r.get<std::string>());
        if (it == names.end()) {
          names.push_back(r.get<std::string>());
          schemas.push_back(&kAny);
          required.push_back(1);
        } else {
          required[static_cast<size_t>(it - names.begin())] = 1;
        }
      }
    }
    const ojson* additional = nullptr;  // schema of extra properties, null: none allowed
    for (const char* key : {"additionalProperties", "unevaluatedProperties"}) {
      if (!s.contains(key)) continue;
      const ojson& a = s[key];
      if (a.is_boolean()) {
        if (a.get<bool>()) additional = &kAny;
      } else if (a.is_object()) {
        additional = &a;
      } else {
        grammar_fail("json_schema: '{}' at {} must be a boolean or a schema", key, path);
      }
    }
    const size_t n = names.size();
    size_t n_required = 0;
    for (char r : required) n_required += static_cast<size_t>(r);
    if (s.contains("minProperties") && int_of(s, "minProperties", path).value_or(0) > static_cast<int64_t>(n_required))
      grammar_fail("json_schema: unsupported keyword 'minProperties' at {} (more than the required properties)", path);
    if (s.contains("maxProperties") && (additional || int_of(s, "maxProperties", path).value_or(0) < static_cast<int64_t>(n)))
      grammar_fail("json_schema: unsupported keyword 'maxProperties' at {} (fewer than the defined properties)", path);

    const int32_t rule = g_.add_rule(fmt::format("object {}#{}", path, n_rules_made_++));
    // tail[i]: the properties from i on, each after a comma, given that one was written before.
    // Only properties up to and including the first required one may be the next written.
    std::vector<int32_t> tail_rule(n + 1, -1);
    for (size_t i = n + 1; i-- > 0;) {
      tail_rule[i] = g_.add_rule(fmt::format("{} tail {}", g_.rule_name(rule), i));
    }
    std::vector<int32_t> value_rule(n, -1);
    auto property = [&](size_t j) {
      if (value_rule[j] < 0)
        value_rule[j] = shared_value(*schemas[j], child_path(child_path(path, "properties"), names[j]), depth);
      return g_.seq({g_.literal(ojson(names[j]).dump()), ws(), g_.literal(":"), ws(), g_.ref(value_rule[j])});
    };
    auto props = [&](size_t from, bool comma) {
      std::vector<int32_t> alts;
      bool all_optional = true;
      for (size_t j = from; j < n; ++j) {
        std::vector<int32_t> parts;
        if (comma) parts = {ws(), g_.literal(","), ws()};
        parts.push_back(property(j));
        parts.push_back(g_.ref(tail_rule[j + 1]));
        alts.push_back(g_.seq(std::move(parts)));
        if (required[j]) {
          all_optional = false;
          break;
        }
      }
      return std::make_pair(std::move(alts), all_optional);
    };
    int32_t extra_rule = -1;
    auto extras = [&](bool comma_first) {
      if (extra_rule < 0) extra_rule = shared_value(*additional, child_path(path, "additionalProperties"), depth);
      auto kv = [&](bool comma) {
        std::vector<int32_t> parts;
        if (comma) parts = {ws(), g_.literal(","), ws()};
        parts.push_back(g_.ref(string_rule()));
        parts.push_back(ws());
        parts.push_back(g_.literal(":"));
        parts.push_back(ws());
        parts.push_back(g_.ref(extra_rule));
        return g_.seq(std::move(parts));
      };
      if (comma_first) return g_.repeat(kv(true), 0, -1);
      return g_.seq({kv(false), g_.repeat(kv(true), 0, -1)});
    };
    for (size_t i = 0; i <= n; ++i) {
      auto [alts, all_optional] = props(i, true);
      if (all_optional) alts.push_back(additional ? extras(true) : g_.empty());
      g_.define(tail_rule[i], g_.alt(std::move(alts)));
    }
    auto [first, all_optional] = props(0, false);
    if (all_optional) {
      if (additional) first.push_back(extras(false));
      first.push_back(g_.empty());
    }
    g_.define(rule, g_.seq({g_.literal("{"), ws(), g_.alt(std::move(first)), ws(), g_.literal("}")}));
    return g_.ref(rule);
  }

  // Whether every value the schema allows is a JSON string (uniqueItems is checked for those).
  bool strings_only(const ojson& s_in, const std::string& path, int depth) const {
    if (depth > g_.limits().max_nesting || !s_in.is_object()) return false;
    const ojson s = resolve(s_in, path);
    if (s.contains("const")) return s["const"].is_string();
    if (s.contains("enum")) {
      if (!s["enum"].is_array()) return false;
      for (const auto& v : s["enum"])
        if (!v.is_string()) return false;
      return true;
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key) || !s[key].is_array() || s[key].empty()) continue;
      if (s.contains("type") && s["type"] == "string") return true;
      for (const auto& a : s[key])
        if (!strings_only(a, path, depth + 1)) return false;
      return true;
    }
    if (s.contains("nullable") && s["nullable"] == true) return false;
    return s.contains("type") && (s["type"] == "string" || s["type"] == ojson::array({"string"}));
  }

  int32_t array_value(const ojson& s, const std::string& path, int depth) {
    const int64_t min_items = int_of(s, "minItems", path).value_or(0);
    const std::optional<int64_t> max_items = int_of(s, "maxItems", path);
    if (max_items && *max_items < min_items) grammar_fail("json_schema: maxItems < minItems at {}", path);
    if (min_items > g_.limits().max_repeat || max_items.value_or(0) > g_.limits().max_repeat)
      grammar_fail("json_schema: minItems/maxItems above {} at {} is not supported", g_.limits().max_repeat, path);
    std::vector<const ojson*> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) grammar_fail("json_schema: 'prefixItems' at {} must be an array", path);
      for (const auto& p : s["prefixItems"]) prefix.push_back(&p);
    }
    static const ojson kAny = true;
    const ojson* items = &kAny;
    bool more_allowed = true;
    if (s.contains("items")) {
      if (s["items"].is_array()) {  // draft 4-7 tuple form
        for (const auto& p : s["items"]) prefix.push_back(&p);
        more_allowed = false;
      } else if (s["items"] == false) {
        more_allowed = false;
      } else {
        items = &s["items"];
      }
    } else if (!prefix.empty()) {
      more_allowed = false;  // narrowed: only the tuple
    }
    // uniqueItems: each item is a rule of its own, so that the matcher sees it complete (a return
    // into the array's rule) and compares it with the earlier ones (unique_items.h).
    const bool unique = s.contains("uniqueItems") && s["uniqueItems"] == true && (!max_items || *max_items > 1);
    if (unique) {
      for (size_t i = 0; i < prefix.size(); ++i)
        if (!strings_only(*prefix[i], path, 0))
          grammar_fail("json_schema: unsupported keyword 'uniqueItems' at {} (supported when every item is a string; "
                       "prefixItems/{} may not be)", path, i);
      if (more_allowed && !strings_only(*items, path, 0))
        grammar_fail("json_schema: unsupported keyword 'uniqueItems' at {} (supported when every item is a string, "
                     "as 'items' with type 'string' or an enum of strings)", path);
    }
    const int32_t rule = g_.add_rule(fmt::format("array {}#{}", path, n_rules_made_++), unique);
    if (unique) g_.set_unique(rule);
    int32_t items_rule = -1;
    auto elem = [&](size_t i) {
      if (i < prefix.size()) {
        const std::string p = child_path(child_path(path, "prefixItems"), std::to_string(i));
        return unique ? g_.ref(shared_value(*prefix[i], p, depth, true)) : value(*prefix[i], p, depth + 1);
      }
      if (items_rule < 0) items_rule = shared_value(*items, child_path(path, "items"), depth, unique);
      return g_.ref(items_rule);
    };
    auto sep = [&](int32_t e) { return g_.seq({ws(), g_.literal(","), ws(), e}); };
    const int64_t n_prefix = static_cast<int64_t>(prefix.size());
    int64_t hi = max_items ? *max_items : -1;
    if (!more_allowed) hi = hi < 0 ? n_prefix : std::min(hi, n_prefix);
    if (hi >= 0 && hi < min_items) grammar_fail("json_schema: the array at {} cannot have minItems elements", path);
    // Items 0..n_prefix-1 from the tuple, then `items`; counts within [min_items, hi].
    // Built from the back: after item k, what may follow.
    const int64_t last_fixed = std::min<int64_t>(hi < 0 ? n_prefix : std::min(hi, n_prefix), n_prefix);
    int32_t rest;  // what follows the prefix items
    {
      const int64_t after = last_fixed;  // items written so far when `rest` starts
      const int64_t need = std::max<int64_t>(0, min_items - after);
      if (hi >= 0 && hi - after <= 0) {
        rest = g_.empty();
      } else {
        const int32_t more_hi = hi < 0 ? -1 : static_cast<int32_t>(hi - after);
        if (after == 0) {
          if (need == 0 && more_hi != 0) {
            rest = g_.repeat(g_.seq({elem(static_cast<size_t>(after)), g_.repeat(sep(elem(static_cast<size_t>(after))), 0, more_hi < 0 ? -1 : more_hi - 1)}), 0, 1);
          } else {
            rest = g_.seq({elem(static_cast<size_t>(after)),
                           g_.repeat(sep(elem(static_cast<size_t>(after))), static_cast<int32_t>(need - 1), more_hi < 0 ? -1 : more_hi - 1)});
          }
        } else {
          rest = g_.repeat(sep(elem(static_cast<size_t>(after))), static_cast<int32_t>(need), more_hi);
        }
      }
    }
    // Prefix items k = last_fixed-1 .. 0: item k may be the last one if k + 1 >= min_items.
    int32_t body = rest;
    for (int64_t k = last_fixed - 1; k >= 0; --k) {
      const int32_t item = k == 0 ? elem(0) : sep(elem(static_cast<size_t>(k)));
      const int32_t with_rest = g_.seq({item, body});
      body = (k >= min_items) ? g_.repeat(with_rest, 0, 1) : with_rest;
    }
    g_.define(rule, g_.seq({g_.literal("["), ws(), body, ws(), g_.literal("]")}));
    return g_.ref(rule);
  }
};

Grammar json_schema_grammar(const ojson& schema, Limits limits) {
  Grammar g(limits);
  JsonSchemaCompiler c(g, schema);
  const int32_t root = g.add_rule("root");
  const int32_t v = c.value(schema, "#", 0);
  g.define(root, g.seq({c.ws(), v, c.ws()}));
  g.set_root(root);
  return g;
}

Grammar any_json_grammar(Limits limits, bool object_only) {
  Grammar g(limits);
  const ojson empty = ojson::object();
  JsonSchemaCompiler c(g, empty);
  const int32_t root = g.add_rule("root");
  const int32_t v = g.ref(object_only ? c.any_object_rule() : c.any_value_rule());
  g.define(root, g.seq({c.ws(), v, c.ws()}));
  g.set_root(root);
  return g;
}

int32_t add_json_value(Grammar& g, const ojson& schema, const std::string& where) {
  JsonSchemaCompiler c(g, schema);
  return c.value(schema, where, 0);
}

}  // namespace memra::grammar

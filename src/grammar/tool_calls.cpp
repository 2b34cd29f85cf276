#include "grammar/tool_calls.h"

#include "grammar/json_schema.h"

namespace memra::grammar {

using ojson = nlohmann::ordered_json;

namespace {

int32_t ws(Grammar& g) {
  ByteSet s;
  s.set(' ');
  s.set('\n');
  s.set('\t');
  s.set('\r');
  return g.repeat(g.bytes(s), 0, -1);
}

int32_t json_call(Grammar& g, const std::string& name, const ojson& params, const std::string& where) {
  return g.seq({g.literal("<tool_call>"), ws(g), g.literal("{"), ws(g), g.literal("\"name\""), ws(g), g.literal(":"),
                ws(g), g.literal(ojson(name).dump()), ws(g), g.literal(","), ws(g), g.literal("\"arguments\""), ws(g),
                g.literal(":"), ws(g), add_json_value(g, params, where), ws(g), g.literal("}"), ws(g),
                g.literal("</tool_call>")});
}

bool is_string_param(const ojson& schema) {
  if (!schema.is_object() || !schema.contains("type")) return false;
  const ojson& t = schema["type"];
  return t.is_string() && t.get<std::string>() == "string" && !schema.contains("enum") && !schema.contains("const") &&
         !schema.contains("pattern") && !schema.contains("format");
}

int32_t xml_call(Grammar& g, const std::string& name, const ojson& params, const std::string& where) {
  std::vector<int32_t> parts{g.literal("<tool_call>"), ws(g), g.literal("<function=" + name + ">"), g.literal("\n")};
  if (params.is_object() && params.contains("properties") && params["properties"].is_object()) {
    std::vector<std::string> required;
    if (params.contains("required") && params["required"].is_array())
      for (const auto& r : params["required"])
        if (r.is_string()) required.push_back(r.get<std::string>());
    for (auto it = params["properties"].begin(); it != params["properties"].end(); ++it) {
      const std::string& p = it.key();
      if (p.find_first_of("<>\n") != std::string::npos)
        grammar_fail("tool '{}': parameter name '{}' cannot be written in the XML tool-call format", name, p);
      int32_t value;
      if (is_string_param(it.value())) {
        CodepointSet no_lt;
        no_lt.add('<', '<');
        value = g.repeat(g.codepoints(no_lt.complement()), 0, -1);
      } else {
        value = add_json_value(g, it.value(), where + "/properties/" + p);
      }
      const int32_t one = g.seq({g.literal("<parameter=" + p + ">\n"), value, g.literal("\n</parameter>\n")});
      const bool req = std::find(required.begin(), required.end(), p) != required.end();
      parts.push_back(req ? one : g.repeat(one, 0, 1));
    }
  }
  parts.push_back(g.literal("</function>"));
  parts.push_back(ws(g));
  parts.push_back(g.literal("</tool_call>"));
  return g.seq(std::move(parts));
}

}  // namespace

Grammar tool_call_grammar(const ojson& tools, ToolCallFormat format, bool one_call, Limits limits) {
  Grammar g(limits);
  const int32_t call_rule = g.add_rule("tool-call");
  std::vector<int32_t> alts;
  static const ojson kAnyObject = ojson{{"type", "object"}, {"additionalProperties", true}};
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& f = tools[i]["function"];
    const std::string name = f["name"].get<std::string>();
    const ojson& params = f.contains("parameters") && f["parameters"].is_object() ? f["parameters"] : kAnyObject;
    const std::string where = "tools[" + std::to_string(i) + "].function.parameters";
    alts.push_back(format == ToolCallFormat::Json ? json_call(g, name, params, where) : xml_call(g, name, params, where));
  }
  g.define(call_rule, g.alt(std::move(alts)));
  const int32_t root = g.add_rule("root");
  if (one_call) g.define(root, g.seq({ws(g), g.ref(call_rule), ws(g)}));
  else g.define(root, g.seq({ws(g), g.ref(call_rule), g.repeat(g.seq({ws(g), g.ref(call_rule)}), 0, -1), ws(g)}));
  g.set_root(root);
  return g;
}

}  // namespace memra::grammar

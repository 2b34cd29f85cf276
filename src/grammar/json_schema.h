// JSON Schema (and "any JSON") to grammar.
//
// Supported: type (one or a list), properties, required, additionalProperties (false, true or a
// schema; absent means false, as OpenAI's strict mode and XGrammar's default have it, which
// only narrows the output), enum, const, items, prefixItems, minItems, maxItems, uniqueItems (when
// every item is a string: the array's rule is marked and the matcher checks each completed item
// against the earlier ones, unique_items.h), anyOf, oneOf (as anyOf), allOf (of object schemas:
// merged), $ref to #, #/$defs/... and #/definitions/... (recursion allowed), minLength /
// maxLength, pattern (regex.h), format (date, time, date-time, email, uuid, ipv4, uri, hostname;
// any other format is an annotation), minimum / maximum / exclusiveMinimum / exclusiveMaximum
// (integers exactly; numbers with integer bounds exactly, otherwise narrowed to the integers
// inside the bounds), multipleOf 1, not (of type, const, enum and anyOf of them: the complement
// is regular, json_exclude.h). Annotations (title, description, default, examples, $schema, $id,
// $comment, ...) are ignored.
// Keywords that constrain the value in ways this compiler cannot express exactly (not of other
// schemas, if/then/else, uniqueItems over non-strings, multipleOf other than 1,
// patternProperties, ...) are refused with a GrammarError naming the keyword and where it is, so
// a request gets a 400 instead of output that does not validate.
//
// Objects are written with properties in schema order; whitespace between tokens is free
// (JSON's ws), so a model may pretty-print.
#pragma once

#include <nlohmann/json.hpp>

#include "grammar/grammar.h"

namespace memra::grammar {

// The schema's value as the root, with optional surrounding whitespace.
Grammar json_schema_grammar(const nlohmann::ordered_json& schema, Limits limits = {});
// Any JSON value (response_format json_object): an object at the top, like OpenAI's JSON mode.
Grammar any_json_grammar(Limits limits = {}, bool object_only = true);

// For grammars that embed JSON values (tool calls): adds the rules of `schema` to `g` and returns
// an expression matching one value (no surrounding whitespace).
class JsonSchemaCompiler;
int32_t add_json_value(Grammar& g, const nlohmann::ordered_json& schema, const std::string& where);

}  // namespace memra::grammar

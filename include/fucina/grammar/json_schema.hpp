#pragma once
// JSON Schema -> GBNF, with the coverage of llama.cpp's json-schema-to-grammar.
//
// Note [JSON Schema subset]
// Supported: `type` (a name or a list of names), `properties` / `required` /
// `additionalProperties` (false, true or a schema; absent: no other keys when `properties`
// is given, any keys when not), `enum`, `const`, `items` (a schema; an array of schemas is
// a tuple, as `prefixItems`), `minItems` / `maxItems`, `minLength` / `maxLength`, `format`
// date, time, date-time, uuid, `pattern` (a regex subset: literals, `.`, classes with
// ranges, negation and \d \w \s, groups, `(?:`, `|`, `* + ? {m} {m,} {m,n}`, anchored
// with ^...$), integer `minimum` / `maximum` / `exclusiveMinimum` / `exclusiveMaximum`,
// `anyOf` / `oneOf` (both: any one alternative), `allOf` (of object schemas: their properties
// merged; alternatives inside it make their properties optional), `$ref` to `#/...` in the
// same document (`$defs`, `definitions`, any path).
// Ignored where llama.cpp ignores it: number bounds, `multipleOf`, `uniqueItems`,
// `patternProperties`, `minProperties`, `not`, `if` / `then` / `else`, `contains`, unknown
// formats (a plain string) and keywords, titles and descriptions. A `pattern` outside the
// subset (lookaround, backreferences, an unanchored pattern) is a warning and allows any
// string, as llama.cpp does.
// Errors (Error(InvalidArgument), naming the schema path): a remote `$ref`, an unresolvable
// one, an unknown type, an invalid regex, integer bounds that admit nothing, a non-object
// schema where one is required.
// Whitespace between tokens is llama.cpp's: nothing, a space, or 1-2 line breaks and up to 20
// spaces/tabs. Keys come in llama.cpp's order: the required properties as the schema lists
// them, then the optional ones (each may be left out), then any additional ones.
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "fucina/grammar/grammar.hpp"

namespace fucina::grammar {

// The GBNF of a schema (start rule `root`). `warnings` (optional) receives one line per
// construct that was accepted loosely (an unsupported pattern).
std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema, std::vector<std::string>* warnings = nullptr);

// parse_gbnf(json_schema_to_gbnf(schema)).
Grammar from_json_schema(const nlohmann::ordered_json& schema, std::vector<std::string>* warnings = nullptr);
// The same from schema text (keeps the text's property order); a JSON syntax error is an
// InvalidArgument naming its position.
Grammar from_json_schema_text(std::string_view schema_text, std::vector<std::string>* warnings = nullptr);

// Any JSON value (`fucina run --json`); `object_only`: any JSON object.
std::string any_json_gbnf(bool object_only = false);

}  // namespace fucina::grammar

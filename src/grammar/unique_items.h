// uniqueItems for arrays of JSON strings: no grammar says "distinct" (the language is not even
// context-free), so the matcher checks it on the text itself. The functions below read that text
// backwards from its end: JSON quotes pair up from any point outside a string (a '"' is a
// delimiter when an even number of backslashes precede it), so the items of the innermost array
// are found without parsing from the start. Values are compared decoded ("a" == "\u0061").
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace memra::grammar {

// Decodes a JSON string's content (the bytes between the quotes) to UTF-8; a lone surrogate
// escape becomes its 3-byte form, unequal to every other character, as in Python's str. False
// when `raw` is not complete, valid content.
bool decode_json_string(std::string_view raw, std::string& out);

// `text` ends with the closing quote of a string item of a JSON array: false when the item equals
// an earlier item of that array. True when it cannot tell because `text` does not reach back to
// the array's '[' and no earlier item seen is equal (the caller checks with the whole text).
bool string_item_is_new(std::string_view text);

// When `text` ends inside a string that is an item of a JSON array of strings: the item's raw
// content so far, and the array's earlier items, decoded. False otherwise.
bool open_string_item(std::string_view text, std::string_view& raw, std::vector<std::string>& earlier);

}  // namespace memra::grammar

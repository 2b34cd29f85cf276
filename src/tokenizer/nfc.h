// Unicode normalization form C (canonical composition), the normalizer of the Qwen tokenizers.
#pragma once

#include <string>
#include <string_view>

namespace memra {

// NFC of `text`, which must be valid UTF-8 (sanitize it first). Pure ASCII is returned as is
// without calling into utf8proc. Should utf8proc reject the input anyway, the text is returned
// unnormalized rather than failing the whole encode.
std::string nfc(std::string_view text);

}  // namespace memra

// The byte-level BPE tokenizer, built from plain vectors so that it does not depend on where the
// vocab came from (Tokenizer::from_gguf is the glue from GGUF metadata).
//
// encode(text):
//   1. ill-formed UTF-8 is replaced by U+FFFD (one per maximal subpart), so any input is valid;
//   2. special tokens are cut out verbatim, leftmost-longest (control + user-defined types, or
//      only user-defined ones when parse_special is false, as Hugging Face does with
//      split_special_tokens and llama.cpp with parse_special=false);
//   3. each stretch between them is NFC-normalized and split by the pre-tokenizer regex;
//   4. each piece's bytes are mapped to the byte-level alphabet and merged by rank.
// No BOS is added here; callers that want one check add_bos().
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace memra {

// `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : int32_t {
  Undefined = 0, Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

struct BpeVocab {
  std::vector<std::string> tokens;  // normal tokens in the byte-level alphabet, others verbatim
  std::vector<std::string> merges;  // "left right", rank = index
  std::vector<int32_t> types;       // TokenType per token; empty = all normal
  std::string pre = "qwen2";        // pre-tokenizer name
  int32_t eos_id = -1;
  int32_t bos_id = -1;
  int32_t pad_id = -1;
  bool add_bos = false;
};

class BpeTokenizer final : public Tokenizer {
 public:
  // Throws memra::Error for inconsistent data (sizes, ids out of range, unknown pre-tokenizer).
  // `source` names where the vocab came from, for messages.
  explicit BpeTokenizer(BpeVocab vocab, const std::string& source = "vocab");

  std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const override;
  const std::string& token_bytes(int32_t id) const override;
  int32_t n_vocab() const override { return static_cast<int32_t>(tokens_.size()); }
  std::optional<int32_t> find(std::string_view token_text) const override;
  int32_t eos_id() const override { return eos_id_; }
  int32_t bos_id() const override { return bos_id_; }
  bool add_bos() const override { return add_bos_; }
  bool is_end_of_generation(int32_t id) const override;
  bool is_special(int32_t id) const override;

  TokenType type(int32_t id) const { return types_[static_cast<size_t>(id)]; }
  const std::string& pre_tokenizer() const { return pre_.name(); }
  size_t n_merges() const { return merge_of_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t id;  // the merged token
  };
  struct Special {
    std::string text;
    int32_t id;
    bool control;  // false: user-defined (matched even when parse_special is false)
  };

  void encode_text(std::string_view text, std::vector<int32_t>& out,
                   std::vector<std::pair<size_t, size_t>>& pieces) const;
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;
  // Longest special token starting at text[pos], or nullptr.
  const Special* special_at(std::string_view text, size_t pos, bool parse_special) const;

  static uint64_t pair_key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  std::vector<std::string> tokens_;  // vocab strings as stored
  std::vector<std::string> bytes_;   // what each token decodes to
  std::vector<TokenType> types_;
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> id_of_;  // -> first id with it
  std::unordered_map<uint64_t, Merge> merge_of_;    // (left id, right id) -> merge
  int32_t byte_id_[256];                            // single-byte token of each byte, or -1
  // Special tokens bucketed by first byte, longest first within a bucket.
  std::vector<Special> specials_[256];
  std::vector<int32_t> end_of_generation_;
  PreTokenizer pre_;
  int32_t eos_id_ = -1, bos_id_ = -1, pad_id_ = -1;
  bool add_bos_ = false;
};

}  // namespace memra

// A synthetic but valid byte-level BPE vocabulary of any size (internal to src/synth).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace memra::synth {

// GGUF tokenizer.ggml.token_type values.
enum TokenType : int32_t { kTokenNormal = 1, kTokenControl = 3, kTokenUserDefined = 4 };

struct SynthVocab {
  std::vector<std::string> tokens;    // GPT-2 byte-encoded strings (UTF-8)
  std::vector<int32_t> token_types;
  std::vector<std::string> merges;    // "left right", rank order
  uint32_t eos_id = 0;                // <|im_end|>
  uint32_t padding_id = 0;            // <|endoftext|>
};

// Layout: ids 0..255 the single-byte tokens in GPT-2 order (printable bytes first, so ' ' is 220
// and '\n' is 198 as in Qwen's vocab); then n_vocab - 256 - 26 merged tokens, each the merge of
// two earlier tokens (listed in `merges` in id order, so merge rank = id - 256); then Qwen's 26
// special tokens (<|endoftext|>, <|im_start|>, <|im_end|>, ..., <think>, </think>).
// The merged tokens grow a letter trie breadth-first from "Ġ" and "a".."z" (each new token is an
// existing one plus a letter), so all strings are distinct and ordinary lower-case words encode
// into multi-byte tokens. Throws memra::Error if n_vocab cannot hold the bytes and specials.
SynthVocab make_vocab(int64_t n_vocab);

// The chat template written into synthetic files (Qwen's ChatML form).
const char* chat_template();

}  // namespace memra::synth

// Byte-level BPE tokenizer configured from GGUF metadata (`tokenizer.ggml.*`): the GPT-2 byte
// to unicode mapping, merges ranked by their order, a pre-tokenizer regex chosen by
// `tokenizer.ggml.pre` (qwen2, qwen35), NFC normalization, and special (control / user-defined)
// tokens recognised verbatim in text.
//
// Invalid UTF-8 in the input to encode() is replaced by U+FFFD (one per maximal ill-formed
// subpart, like Python's errors="replace") before anything else, so every input encodes without
// error; decode(encode(s)) == NFC(s) for valid s.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace memra::gguf { class File; }

namespace memra {

class Tokenizer {
 public:
  // Throws memra::Error if the metadata is missing or unsupported (model not "gpt2", unknown
  // pre-tokenizer): the message names the key and the value found.
  static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);
  virtual ~Tokenizer() = default;

  // parse_special: recognise control-token strings (e.g. "<|im_start|>") in text as their ids.
  // User-defined tokens (e.g. "<think>") are recognised either way, as Hugging Face does with
  // split_special_tokens=True. Never adds BOS/EOS (see add_bos()). Thread-safe.
  virtual std::vector<int32_t> encode(std::string_view text, bool parse_special = true) const = 0;
  // The bytes a token stands for (byte-level decoded; control and user-defined tokens give
  // their text, unused padding entries nothing). Throws memra::Error for an id out of range.
  virtual const std::string& token_bytes(int32_t id) const = 0;
  // Concatenated bytes (may end in an incomplete UTF-8 sequence; see StreamDecoder).
  std::string decode(std::span<const int32_t> ids) const;

  virtual int32_t n_vocab() const = 0;
  virtual std::optional<int32_t> find(std::string_view token_text) const = 0;  // exact vocab string
  virtual int32_t eos_id() const = 0;  // -1 if none
  virtual int32_t bos_id() const = 0;  // -1 if none
  virtual bool add_bos() const = 0;
  // End-of-generation: eos, and the chat-end tokens the vocab has (<|im_end|>, <|endoftext|>).
  virtual bool is_end_of_generation(int32_t id) const = 0;
  // Control tokens (<|im_start|>, <|endoftext|>, ...): what a display would hide.
  virtual bool is_special(int32_t id) const = 0;
};

// Turns a stream of token ids into text without ever emitting a broken UTF-8 sequence: bytes of
// an incomplete code point are held back until the token that completes it arrives.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tok) : tok_(tok) {}
  // Returns the newly completed text (possibly empty), always valid UTF-8: bytes that can no
  // longer become a valid sequence come out as U+FFFD at once, an incomplete tail is held.
  // Throws memra::Error for an id out of range.
  std::string push(int32_t id);
  // Returns whatever is held back (an incomplete sequence becomes U+FFFD) and resets. The
  // concatenation of all outputs equals utf8::sanitize(tok.decode(ids)).
  std::string flush();

 private:
  const Tokenizer& tok_;
  std::string pending_;
};

}  // namespace memra

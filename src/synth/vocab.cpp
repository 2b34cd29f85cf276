#include "synth/vocab.h"

#include <array>
#include <cstring>

#include "common/error.h"

namespace memra::synth {
namespace {

// Qwen's special tokens in id order (Qwen2.5 / Qwen3 tokenizer_config). The <|...|> ones are
// marked special there (-> CONTROL); the tag-like ones are plain added tokens (-> USER_DEFINED).
constexpr const char* kSpecials[] = {
    "<|endoftext|>",     "<|im_start|>",   "<|im_end|>",        "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>",     "<|box_end|>",    "<|quad_start|>",    "<|quad_end|>",         "<|vision_start|>",
    "<|vision_end|>",    "<|vision_pad|>", "<|image_pad|>",     "<|video_pad|>",        "<tool_call>",
    "</tool_call>",      "<|fim_prefix|>", "<|fim_middle|>",    "<|fim_suffix|>",       "<|fim_pad|>",
    "<|repo_name|>",     "<|file_sep|>",   "<tool_response>",   "</tool_response>",     "<think>",
    "</think>",
};
constexpr int64_t kNumSpecials = sizeof(kSpecials) / sizeof(kSpecials[0]);

void append_utf8(std::string& out, uint32_t cp) {
  // GPT-2 byte symbols are all below U+0800: one or two UTF-8 bytes.
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool printable_byte(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

// GPT-2's byte-to-symbol map: printable bytes stand for themselves; the other 68 bytes take
// the code points 256, 257, ... in increasing byte order. Token ids follow the same order:
// printable bytes first, then the rest.
std::array<std::string, 256> byte_tokens_in_id_order() {
  std::array<std::string, 256> out;
  int id = 0;
  for (int b = 0; b < 256; ++b)
    if (printable_byte(b)) append_utf8(out[id++], static_cast<uint32_t>(b));
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b)
    if (!printable_byte(b)) append_utf8(out[id++], next++);
  return out;
}

}  // namespace

SynthVocab make_vocab(int64_t n_vocab) {
  const int64_t n_merges = n_vocab - 256 - kNumSpecials;
  if (n_merges < 27)
    fail("vocabulary size {} is too small for a synthetic BPE vocab (need at least {})", n_vocab,
         256 + kNumSpecials + 27);
  SynthVocab v;
  v.tokens.reserve(static_cast<size_t>(n_vocab));
  v.token_types.reserve(static_cast<size_t>(n_vocab));
  v.merges.reserve(static_cast<size_t>(n_merges));

  for (std::string& t : byte_tokens_in_id_order()) v.tokens.push_back(std::move(t));
  v.token_types.assign(256, kTokenNormal);

  // Breadth-first letter trie: roots "Ġ" (space) then "a".."z"; node i's children are
  // tokens[i] + letter. The queue is a list of token ids whose children are still to come.
  std::vector<int32_t> queue;
  queue.reserve(static_cast<size_t>(n_merges) + 27);
  const int32_t space_id = 220;   // 'Ġ'
  const int32_t letter_a = 'a' - 33;  // printable bytes start at '!' (33) with id 0
  queue.push_back(space_id);
  for (int c = 0; c < 26; ++c) queue.push_back(letter_a + c);
  int64_t made = 0;
  for (size_t qi = 0; made < n_merges; ++qi) {
    const int32_t parent = queue[qi];
    for (int c = 0; c < 26 && made < n_merges; ++c) {
      const std::string& left = v.tokens[static_cast<size_t>(parent)];
      const std::string& right = v.tokens[static_cast<size_t>(letter_a + c)];
      std::string merge;
      merge.reserve(left.size() + 1 + right.size());
      merge.append(left).append(" ").append(right);
      v.merges.push_back(std::move(merge));
      queue.push_back(static_cast<int32_t>(v.tokens.size()));
      v.tokens.push_back(left + right);
      v.token_types.push_back(kTokenNormal);
      ++made;
    }
  }

  for (const char* s : kSpecials) {
    const size_t len = std::strlen(s);
    const bool control = len >= 4 && s[0] == '<' && s[1] == '|' && s[len - 2] == '|' && s[len - 1] == '>';
    if (std::strcmp(s, "<|endoftext|>") == 0) v.padding_id = static_cast<uint32_t>(v.tokens.size());
    if (std::strcmp(s, "<|im_end|>") == 0) v.eos_id = static_cast<uint32_t>(v.tokens.size());
    v.tokens.emplace_back(s);
    v.token_types.push_back(control ? kTokenControl : kTokenUserDefined);
  }
  MEMRA_ASSERT(static_cast<int64_t>(v.tokens.size()) == n_vocab);
  return v;
}

const char* chat_template() {
  // ChatML as Qwen renders it; with enable_thinking=false the assistant turn opens with an
  // empty think block, as in Qwen3's own template.
  return "{%- for message in messages %}"
         "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
         "{%- endfor %}"
         "{%- if add_generation_prompt %}"
         "{{- '<|im_start|>assistant\\n' }}"
         "{%- if enable_thinking is defined and enable_thinking is false %}"
         "{{- '<think>\\n\\n</think>\\n\\n' }}"
         "{%- endif %}"
         "{%- endif %}";
}

}  // namespace memra::synth

// Tokenizer::from_gguf (glue from GGUF metadata to BpeVocab), decode and StreamDecoder.
#include "tokenizer/tokenizer.h"

#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/utf8.h"

namespace memra {
namespace {

std::vector<std::string> to_strings(const std::vector<std::string_view>& v) {
  return std::vector<std::string>(v.begin(), v.end());
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& file) {
  const std::string& path = file.path();
  const auto model = file.get_string_opt("tokenizer.ggml.model");
  if (!model) fail("{}: the file has no tokenizer (tokenizer.ggml.model is missing)", path);
  if (*model != "gpt2") {
    fail("{}: unsupported tokenizer: tokenizer.ggml.model = \"{}\" (memra supports \"gpt2\", byte-level BPE)",
         path, *model);
  }
  const auto pre = file.get_string_opt("tokenizer.ggml.pre");
  if (!pre) fail("{}: tokenizer.ggml.pre is missing (memra supports \"qwen2\" and \"qwen35\")", path);
  if (!PreTokenizer::supported(*pre)) {
    fail("{}: unsupported pre-tokenizer: tokenizer.ggml.pre = \"{}\" (memra supports \"qwen2\" and \"qwen35\")",
         path, *pre);
  }
  if (!file.has("tokenizer.ggml.tokens")) fail("{}: tokenizer.ggml.tokens is missing", path);
  if (!file.has("tokenizer.ggml.merges")) {
    fail("{}: tokenizer.ggml.merges is missing (a \"gpt2\" tokenizer needs its merges)", path);
  }

  BpeVocab v;
  v.pre = std::string(*pre);
  v.tokens = to_strings(file.get_string_array("tokenizer.ggml.tokens"));
  v.merges = to_strings(file.get_string_array("tokenizer.ggml.merges"));
  if (file.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = file.get_int_array("tokenizer.ggml.token_type");
    v.types.reserve(types.size());
    // Out-of-range values become -1, which BpeTokenizer reports with the token's index.
    for (int64_t t : types) v.types.push_back(t >= 0 && t <= INT32_MAX ? static_cast<int32_t>(t) : -1);
  }
  const size_t n = v.tokens.size();
  auto id = [&](const char* key) -> int32_t {
    const auto value = file.get_u64_opt(key);
    if (!value) return -1;
    if (*value >= n) fail("{}: {} = {} is out of range for a vocab of {} tokens", path, key, *value, n);
    return static_cast<int32_t>(*value);
  };
  v.eos_id = id("tokenizer.ggml.eos_token_id");
  v.bos_id = id("tokenizer.ggml.bos_token_id");
  v.pad_id = id("tokenizer.ggml.padding_token_id");
  v.add_bos = file.get_bool_opt("tokenizer.ggml.add_bos_token").value_or(false);
  return std::make_unique<BpeTokenizer>(std::move(v), path);
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out.append(token_bytes(id));
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  pending_.append(tok_.token_bytes(id));
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const utf8::Scan r = utf8::scan(std::string_view(pending_).substr(i));
    if (r.status == utf8::Status::Incomplete) break;  // wait for the token that completes it
    if (r.status == utf8::Status::Valid) {
      out.append(pending_, i, r.length);
    } else {
      out.append(utf8::kReplacement);
    }
    i += r.length;
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = utf8::sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace memra

// Pre-tokenizer: splits normalized text into the pieces BPE runs on, with the regex selected by
// `tokenizer.ggml.pre`. Pieces are byte ranges that tile the input exactly (a stretch the regex
// does not match becomes a piece of its own, as in Hugging Face's Split(behavior=Isolated)).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace memra {

class PreTokenizer {
 public:
  // Names: "qwen2" (Qwen2/Qwen3) and "qwen35" (Qwen3.5). Throws memra::Error naming
  // `tokenizer.ggml.pre` and the value for anything else.
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  static bool supported(std::string_view name);
  const std::string& name() const { return name_; }
  const std::string& pattern() const { return pattern_; }

  // Appends the [begin, end) byte ranges of the pieces of `text` (valid UTF-8) to `out`.
  // Safe to call from several threads at once.
  void split(std::string_view text, std::vector<std::pair<size_t, size_t>>& out) const;

 private:
  struct Regex;
  std::string name_;
  std::string pattern_;
  std::unique_ptr<Regex> re_;
};

}  // namespace memra

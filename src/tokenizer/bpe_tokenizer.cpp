#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "common/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/nfc.h"
#include "tokenizer/utf8.h"

namespace memra {
namespace {

// Chat-turn and document ends that stop generation even when the file names another eos.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|eom_id|>",
};

TokenType to_type(int32_t v, size_t id, const std::string& source) {
  if (v < 0 || v > static_cast<int32_t>(TokenType::Byte)) {
    fail("{}: token {} has token type {} (tokenizer.ggml.token_type allows 0..6)", source, id, v);
  }
  return static_cast<TokenType>(v);
}

void check_id(int32_t id, size_t n_vocab, const char* key, const std::string& source) {
  if (id >= 0 && static_cast<size_t>(id) >= n_vocab) {
    fail("{}: {} = {} is out of range for a vocab of {} tokens", source, key, id, n_vocab);
  }
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeVocab v, const std::string& source) : pre_(v.pre) {
  const size_t n = v.tokens.size();
  if (n == 0) fail("{}: the vocab is empty (tokenizer.ggml.tokens)", source);
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    fail("{}: the vocab has {} tokens, more than memra supports", source, n);
  }
  if (!v.types.empty() && v.types.size() != n) {
    fail("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens has {}", source,
         v.types.size(), n);
  }
  check_id(v.eos_id, n, "tokenizer.ggml.eos_token_id", source);
  check_id(v.bos_id, n, "tokenizer.ggml.bos_token_id", source);
  check_id(v.pad_id, n, "tokenizer.ggml.padding_token_id", source);
  eos_id_ = v.eos_id < 0 ? -1 : v.eos_id;
  bos_id_ = v.bos_id < 0 ? -1 : v.bos_id;
  pad_id_ = v.pad_id < 0 ? -1 : v.pad_id;
  add_bos_ = v.add_bos && bos_id_ >= 0;

  tokens_ = std::move(v.tokens);
  types_.resize(n, TokenType::Normal);
  bytes_.resize(n);
  id_of_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!v.types.empty()) types_[i] = to_type(v.types[i], i, source);
    const std::string& text = tokens_[i];
    switch (types_[i]) {
      case TokenType::Control:
      case TokenType::UserDefined:
      case TokenType::Unknown:
        // Stored verbatim (the converter writes added tokens as plain text).
        bytes_[i] = text;
        break;
      case TokenType::Unused:
        bytes_[i].clear();  // padding entries ("[PAD151669]") stand for no text
        break;
      default:
        byte_level::decode(text, bytes_[i]);
        break;
    }
    id_of_.emplace(text, static_cast<int32_t>(i));
  }

  for (int b = 0; b < 256; ++b) {
    auto it = id_of_.find(byte_level::byte_to_utf8(static_cast<uint8_t>(b)));
    byte_id_[b] = it == id_of_.end() ? -1 : it->second;
  }

  merge_of_.reserve(v.merges.size());
  std::string joined;
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const size_t sp = m.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 == m.size()) {
      fail("{}: merge {} (\"{}\") is not of the form \"left right\" (tokenizer.ggml.merges)", source, r, m);
    }
    if (r > std::numeric_limits<uint32_t>::max()) fail("{}: too many merges ({})", source, v.merges.size());
    const std::string_view left(m.data(), sp), right(m.data() + sp + 1, m.size() - sp - 1);
    joined.assign(left).append(right);
    auto a = id_of_.find(left), b = id_of_.find(right), c = id_of_.find(joined);
    // A merge whose parts or result are not in the vocab can never fire; Hugging Face refuses
    // such a file, we simply leave the merge out.
    if (a == id_of_.end() || b == id_of_.end() || c == id_of_.end()) continue;
    merge_of_.emplace(pair_key(a->second, b->second), Merge{static_cast<uint32_t>(r), c->second});
  }

  for (size_t i = 0; i < n; ++i) {
    const bool control = types_[i] == TokenType::Control;
    if ((control || types_[i] == TokenType::UserDefined) && !tokens_[i].empty()) {
      specials_[static_cast<uint8_t>(tokens_[i][0])].push_back({tokens_[i], static_cast<int32_t>(i), control});
    }
  }
  for (auto& bucket : specials_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [](const Special& a, const Special& b) { return a.text.size() > b.text.size(); });
  }

  if (eos_id_ >= 0) end_of_generation_.push_back(eos_id_);
  for (std::string_view t : kEndOfGenerationTexts) {
    auto it = id_of_.find(t);
    if (it != id_of_.end() && types_[static_cast<size_t>(it->second)] == TokenType::Control) {
      end_of_generation_.push_back(it->second);
    }
  }
}

std::optional<int32_t> BpeTokenizer::find(std::string_view token_text) const {
  auto it = id_of_.find(token_text);
  if (it == id_of_.end()) return std::nullopt;
  return it->second;
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  if (id < 0 || id >= n_vocab()) fail("token id {} is out of range (the vocab has {} tokens)", id, n_vocab());
  return bytes_[static_cast<size_t>(id)];
}

bool BpeTokenizer::is_end_of_generation(int32_t id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

bool BpeTokenizer::is_special(int32_t id) const {
  return id >= 0 && id < n_vocab() && types_[static_cast<size_t>(id)] == TokenType::Control;
}

const BpeTokenizer::Special* BpeTokenizer::special_at(std::string_view text, size_t pos, bool parse_special) const {
  for (const Special& s : specials_[static_cast<uint8_t>(text[pos])]) {
    if (s.control && !parse_special) continue;
    if (text.size() - pos >= s.text.size() && text.compare(pos, s.text.size(), s.text) == 0) return &s;
  }
  return nullptr;
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool parse_special) const {
  std::string sanitized;
  if (!utf8::is_valid(text)) {
    sanitized = utf8::sanitize(text);
    text = sanitized;
  }
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 1);
  std::vector<std::pair<size_t, size_t>> pieces;
  size_t seg = 0;  // start of the stretch not yet encoded
  size_t i = 0;
  while (i < text.size()) {
    // Specials start with a lead byte and the text is valid UTF-8, so a match can only begin on
    // a code point boundary.
    const Special* s = specials_[static_cast<uint8_t>(text[i])].empty() ? nullptr : special_at(text, i, parse_special);
    if (s == nullptr) {
      ++i;
      continue;
    }
    encode_text(text.substr(seg, i - seg), out, pieces);
    out.push_back(s->id);
    i += s->text.size();
    seg = i;
  }
  encode_text(text.substr(seg), out, pieces);
  return out;
}

void BpeTokenizer::encode_text(std::string_view text, std::vector<int32_t>& out,
                               std::vector<std::pair<size_t, size_t>>& pieces) const {
  if (text.empty()) return;
  const std::string normalized = nfc(text);
  const std::string_view s = normalized;
  pieces.clear();
  pre_.split(s, pieces);
  for (auto [b, e] : pieces) encode_piece(s.substr(b, e - b), out);
}

// Merges by rank: a min-heap of candidate pairs keyed (rank, position of the left symbol), so the
// lowest rank goes first and equal ranks go left to right. Symbols form a linked list over the
// piece's bytes; a merged symbol keeps its left part's slot. Heap entries are not removed when a
// neighbour changes; a popped entry is used only if its pair is still there with that rank
// (ranks are unique per pair). O(n log n) in the piece length.
void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.size() == 1) {
    const int32_t id = byte_id_[static_cast<uint8_t>(piece[0])];
    if (id >= 0) out.push_back(id);
    return;
  }
  if (piece.size() >= std::numeric_limits<uint32_t>::max()) {
    fail("text piece of {} bytes is too long to tokenize", piece.size());
  }
  struct Symbol {
    int32_t id;    // -1 once merged into its left neighbour
    int32_t prev;  // slot index, -1 at the ends
    int32_t next;
  };
  std::vector<Symbol> sym;
  sym.reserve(piece.size());
  for (char c : piece) {
    // A byte with no token of its own (only in a vocab missing part of the byte alphabet) is
    // dropped, as Hugging Face's BPE does without an unk token.
    const int32_t id = byte_id_[static_cast<uint8_t>(c)];
    if (id < 0) continue;
    const int32_t k = static_cast<int32_t>(sym.size());
    sym.push_back({id, k - 1, -1});
    if (k > 0) sym[static_cast<size_t>(k - 1)].next = k;
  }
  if (sym.empty()) return;

  std::vector<uint64_t> heap;
  heap.reserve(sym.size());
  auto rank_of = [&](int32_t left) -> const Merge* {
    const int32_t right = sym[static_cast<size_t>(left)].next;
    if (right < 0) return nullptr;
    auto it = merge_of_.find(pair_key(sym[static_cast<size_t>(left)].id, sym[static_cast<size_t>(right)].id));
    return it == merge_of_.end() ? nullptr : &it->second;
  };
  auto push = [&](int32_t left) {
    if (left < 0) return;
    if (const Merge* m = rank_of(left)) {
      heap.push_back((static_cast<uint64_t>(m->rank) << 32) | static_cast<uint32_t>(left));
      std::push_heap(heap.begin(), heap.end(), std::greater<>());
    }
  };
  for (int32_t k = 0; k + 1 < static_cast<int32_t>(sym.size()); ++k) {
    if (const Merge* m = rank_of(k)) heap.push_back((static_cast<uint64_t>(m->rank) << 32) | static_cast<uint32_t>(k));
  }
  std::make_heap(heap.begin(), heap.end(), std::greater<>());

  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    const uint64_t top = heap.back();
    heap.pop_back();
    const auto left = static_cast<int32_t>(top & 0xFFFFFFFFu);
    const auto rank = static_cast<uint32_t>(top >> 32);
    Symbol& l = sym[static_cast<size_t>(left)];
    if (l.id < 0) continue;
    const Merge* m = rank_of(left);
    if (m == nullptr || m->rank != rank) continue;  // stale
    Symbol& r = sym[static_cast<size_t>(l.next)];
    l.id = m->id;
    r.id = -1;
    l.next = r.next;
    if (r.next >= 0) sym[static_cast<size_t>(r.next)].prev = left;
    push(l.prev);
    push(left);
  }
  for (int32_t k = 0; k >= 0; k = sym[static_cast<size_t>(k)].next) out.push_back(sym[static_cast<size_t>(k)].id);
}

}  // namespace memra

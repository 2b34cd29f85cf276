// memra tokenize / memra detokenize: text <-> token ids with a model's own tokenizer (GGUF
// metadata only; no weights are read).
//   memra tokenize -m M.gguf --text TEXT [--no-special]   -> {"ids": [...]}
//   memra detokenize -m M.gguf --ids 1,2,3 [--json]       -> the text exactly (no newline added),
//                                                            or {"text": "..."}
#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/model_source.h"
#include "common/error.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace memra::cli::cmd_tokenize {
namespace {

struct TokenizeArgs {
  std::string model;
  std::string text;
  bool no_special = false;
};

struct DetokenizeArgs {
  std::string model;
  std::string ids;
  bool json = false;
};

// "1,2,3", with optional spaces and optional surrounding brackets ("[1, 2, 3]" as printed by
// `memra tokenize`). An empty list is allowed and decodes to empty text.
std::vector<int32_t> parse_ids(const std::string& s) {
  std::string body = s;
  auto trim = [](std::string& t) {
    const size_t b = t.find_first_not_of(" \t\r\n");
    if (b == std::string::npos) {
      t.clear();
      return;
    }
    t = t.substr(b, t.find_last_not_of(" \t\r\n") - b + 1);
  };
  trim(body);
  if (!body.empty() && body.front() == '[') {
    if (body.back() != ']') fail("--ids: '{}' opens '[' but does not close it", s);
    body = body.substr(1, body.size() - 2);
    trim(body);
  }
  std::vector<int32_t> ids;
  if (body.empty()) return ids;
  size_t start = 0;
  while (true) {
    const size_t comma = body.find(',', start);
    std::string item = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    trim(item);
    int64_t v = 0;
    bool ok = !item.empty() && item.size() <= 10;
    for (char c : item) {
      if (c < '0' || c > '9') {
        ok = false;
        break;
      }
      v = v * 10 + (c - '0');
    }
    if (!ok || v > INT32_MAX) fail("--ids: '{}' is not a token id (expected non-negative integers like 1,2,3)", item);
    ids.push_back(static_cast<int32_t>(v));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return ids;
}

std::unique_ptr<Tokenizer> open_tokenizer(const std::string& path, std::unique_ptr<gguf::File>& file) {
  file = open_model_file(path);
  return Tokenizer::from_gguf(*file);
}

void run_tokenize(const TokenizeArgs& a) {
  std::unique_ptr<gguf::File> file;
  const auto tok = open_tokenizer(a.model, file);
  const std::vector<int32_t> ids = tok->encode(a.text, !a.no_special);
  const nlohmann::json out = {{"ids", ids}};
  std::printf("%s\n", out.dump().c_str());
}

void run_detokenize(const DetokenizeArgs& a) {
  std::unique_ptr<gguf::File> file;
  const auto tok = open_tokenizer(a.model, file);
  const std::vector<int32_t> ids = parse_ids(a.ids);
  for (int32_t id : ids) {
    if (id >= tok->n_vocab()) fail("--ids: token id {} is out of range for a vocabulary of {}", id, tok->n_vocab());
  }
  const std::string text = tok->decode(ids);
  if (a.json) {
    // JSON strings must be valid UTF-8: a sequence cut off by the last id becomes U+FFFD.
    const nlohmann::json out = {{"text", utf8::sanitize(text)}};
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::fwrite(text.data(), 1, text.size(), stdout);
  }
}

const CommandRegistrar tokenize_registrar("tokenize", [](CLI::App& app) {
  auto args = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "print the token ids of a text as JSON: {\"ids\": [...]}");
  cmd->add_option("-m,--model", args->model, "GGUF model (or vocab-only) file")->default_str("the bundled demo model");
  cmd->add_option("--text", args->text, "text to tokenize")->required();
  cmd->add_flag("--no-special", args->no_special,
                "treat control-token strings such as <|im_start|> as plain text");
  cmd->callback([args] { run_tokenize(*args); });
});

const CommandRegistrar detokenize_registrar("detokenize", [](CLI::App& app) {
  auto args = std::make_shared<DetokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("detokenize", "print the text of token ids (exactly, no newline added)");
  cmd->add_option("-m,--model", args->model, "GGUF model (or vocab-only) file")->default_str("the bundled demo model");
  cmd->add_option("--ids", args->ids, "comma-separated token ids, e.g. 9707,1879")->required();
  cmd->add_flag("--json", args->json, "print {\"text\": \"...\"} instead (invalid UTF-8 becomes U+FFFD)");
  cmd->callback([args] { run_detokenize(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_tokenize

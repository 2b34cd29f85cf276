// memra template: renders an OpenAI-style chat request through a model's chat template
// (tokenizer.chat_template in the GGUF, or --template FILE) and prints the prompt exactly as
// rendered, with no newline added.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "chat/chat_template.h"
#include "cli/command.h"
#include "cli/model_source.h"
#include "common/error.h"
#include "gguf/gguf.h"

namespace memra::cli::cmd_template {
namespace {

struct Args {
  std::string model;
  std::string request;
  std::string template_file;
  bool print_vars = false;
};

std::string read_file(const std::string& path, const char* what) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), {});
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot read {} '{}'", what, path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The text of the token stored under `id_key`, if the model names one.
std::optional<std::string> token_text(const gguf::File& f, const char* id_key) {
  auto id = f.get_u64_opt(id_key);
  if (!id || !f.has("tokenizer.ggml.tokens")) return std::nullopt;
  auto tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (*id >= tokens.size()) return std::nullopt;
  return std::string(tokens[*id]);
}

void run(const Args& a) {
  std::string request_text = read_file(a.request, "request file");
  nlohmann::ordered_json request = nlohmann::ordered_json::parse(request_text, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded()) fail("'{}' is not valid JSON", a.request);

  chat::ChatTemplateOptions options;
  std::string source;
  std::unique_ptr<gguf::File> model;
  if (!a.model.empty() || a.template_file.empty()) {
    model = open_model_file(a.model);
    options.bos_token = token_text(*model, "tokenizer.ggml.bos_token_id");
    options.eos_token = token_text(*model, "tokenizer.ggml.eos_token_id");
  }
  if (!a.template_file.empty()) {
    source = read_file(a.template_file, "template file");
  } else {
    auto tpl = model->get_string_opt("tokenizer.chat_template");
    if (!tpl) fail("{} has no tokenizer.chat_template; pass --template FILE", model->path());
    source = std::string(*tpl);
  }

  if (a.print_vars) {
    std::string vars = chat::chat_template_variables(request, options).dump(2);
    std::fwrite(vars.data(), 1, vars.size(), stdout);
    std::fputc('\n', stdout);
    return;
  }
  std::string prompt = chat::render_chat(source, request, options);
  std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  std::fflush(stdout);
}

CommandRegistrar reg("template", [](CLI::App& app) {
  auto args = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("template", "Render a chat request through the model's chat template");
  cmd->add_option("-m,--model", args->model, "GGUF model file (default: the bundled demo model)");
  cmd->add_option("--request", args->request,
                  "OpenAI-style chat request JSON (messages, tools, add_generation_prompt, "
                  "chat_template_kwargs); - reads stdin")
      ->required();
  cmd->add_option("--template", args->template_file, "use this Jinja template file instead of the model's");
  cmd->add_flag("--print-vars", args->print_vars, "print the template variables (normalised request) instead");
  cmd->callback([args] { run(*args); });
});

}  // namespace
}  // namespace memra::cli::cmd_template

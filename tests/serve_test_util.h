// Fixtures shared by the serve tests: the tiny qwen35 fixture model as an engine on the CPU, and
// as the API layer's ModelInfo.
#pragma once

#include <memory>

#include "gguf/gguf.h"
#include "engine/engine.h"
#include "serve/chat_prompt.h"
#include "serve/openai_api.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve::fixtures {

inline Engine* open_tiny_engine(int32_t ctx) {
  EngineOptions o;
  o.device = "cpu";
  o.ctx = ctx;
  o.prefill_chunk = 32;
  Engine* e = Engine::open(memra::test::fixture("qwen35-tiny.f32.gguf"), o).release();
  e->tokenizer();
  return e;
}

// The file and tokenizer a ModelInfo points into, kept alive with it.
struct TinyApiModel {
  std::unique_ptr<gguf::File> file;
  std::unique_ptr<Tokenizer> tokenizer;
  ModelInfo model;
};

inline TinyApiModel* open_tiny_api_model(int32_t ctx, int32_t max_batch) {
  auto* m = new TinyApiModel();
  m->file = gguf::File::open(memra::test::fixture("qwen35-tiny.f32.gguf"));
  m->tokenizer = Tokenizer::from_gguf(*m->file);
  m->model.name = "tiny";
  m->model.tokenizer = m->tokenizer.get();
  m->model.chat_template = std::make_unique<chat::ChatTemplate>(*m->file->get_string_opt("tokenizer.chat_template"));
  m->model.n_vocab = m->tokenizer->n_vocab();
  m->model.ctx = ctx;
  m->model.max_batch = max_batch;
  index_vocab(m->model);
  return m;
}

}  // namespace memra::serve::fixtures

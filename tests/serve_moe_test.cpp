// The mixture-of-experts architectures served like the dense ones (issue 11, "Serving"): the
// scheduler drives a qwen35moe and a qwen3next engine (the held-out fixtures, CPU) with
// concurrent requests, and each request's tokens equal its run alone, whatever its batch mates
// route to.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "serve/scheduler.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {
namespace {

using namespace std::chrono_literals;

struct MoeAnswer {
  std::string text;
  FinishReason finish = FinishReason::None;
  int32_t tokens = 0;
};

MoeAnswer collect(const std::shared_ptr<RequestStream>& s) {
  MoeAnswer a;
  std::vector<ChoiceEvent> events;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (s->wait(events, 200ms)) {
    for (const ChoiceEvent& e : events) {
      a.text += e.text;
      if (e.finish != FinishReason::None) {
        a.finish = e.finish;
        a.tokens = e.completion_tokens;
      }
    }
    events.clear();
    if (std::chrono::steady_clock::now() > deadline) {
      ADD_FAILURE() << "request did not finish within 60 s";
      s->cancel();
      break;
    }
  }
  return a;
}

GenerationSpec spec(Engine& e, const std::string& prompt, int max_tokens, float temperature, uint64_t seed) {
  GenerationSpec s;
  s.prompt = e.tokenizer().encode(prompt);
  s.max_tokens = max_tokens;
  s.sampling.temperature = temperature;
  s.sampling.seed = seed;
  s.ignore_eos = true;  // fixed lengths: the random fixture model may emit its EOS early
  return s;
}

void expect_concurrent_requests_equal_their_runs_alone(const std::string& fixture) {
  EngineOptions o;
  o.device = "cpu";
  o.ctx = 256;
  o.prefill_chunk = 16;
  std::unique_ptr<Engine> engine = Engine::open(test::fixture(fixture + ".f32.gguf"), o);
  const std::vector<std::string> prompts = {"The experts of a mixture", "Once upon a time, in a land",
                                            "def route(tokens):", "1, 2, 3, 5, 8,"};
  Scheduler sched(*engine, {}, nullptr);
  sched.start();
  std::vector<MoeAnswer> alone;
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::shared_ptr<RequestStream> stream;
    ASSERT_EQ(sched.submit(spec(*engine, prompts[i], 10, i % 2 ? 0.8f : 0.0f, 7 + i), stream), SubmitStatus::Accepted);
    alone.push_back(collect(stream));
    EXPECT_EQ(alone.back().finish, FinishReason::Length);
    EXPECT_EQ(alone.back().tokens, 10);
  }
  std::vector<std::shared_ptr<RequestStream>> streams(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i)
    ASSERT_EQ(sched.submit(spec(*engine, prompts[i], 10, i % 2 ? 0.8f : 0.0f, 7 + i), streams[i]),
              SubmitStatus::Accepted);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const MoeAnswer together = collect(streams[i]);
    EXPECT_EQ(together.text, alone[i].text) << fixture << " request " << i;
    EXPECT_EQ(together.tokens, 10);
  }
}

TEST(ServeMoe, Qwen35MoeConcurrentRequestsEqualTheirRunsAlone) {
  expect_concurrent_requests_equal_their_runs_alone("qwen35moe-tiny");
}

TEST(ServeMoe, Qwen3NextConcurrentRequestsEqualTheirRunsAlone) {
  expect_concurrent_requests_equal_their_runs_alone("qwen3next-tiny");
}

}  // namespace
}  // namespace memra::serve

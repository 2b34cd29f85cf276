// The scheduler without HTTP: stop strings (also across token boundaries), n > 1, logprobs,
// cancellation, prompts prefilled between decode steps, and the lean sampling paths agreeing
// with CPU sampling of full logits.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "engine/engine.h"
#include "serve/scheduler.h"
#include "serve/stop_matcher.h"
#include "serve_test_util.h"
#include "test_util.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {
namespace {

using namespace std::chrono_literals;

TEST(ServeStopMatcher, HoldsBackPrefixesAndCutsAtTheEarliestStop) {
  StopMatcher m({"END", "xyz"});
  EXPECT_EQ(m.feed("hello E"), "hello ");  // "E" may start "END"
  EXPECT_EQ(m.feed("N"), "");               // "EN" still may
  EXPECT_EQ(m.feed("Dtail"), "");           // "END" completed: nothing after it
  EXPECT_TRUE(m.matched());
  EXPECT_EQ(m.feed("more"), "");
  EXPECT_EQ(m.flush(), "");

  StopMatcher n({"END"});
  EXPECT_EQ(n.feed("a E"), "a ");
  EXPECT_EQ(n.feed("x"), "Ex");  // "Ex" cannot start "END": released
  EXPECT_EQ(n.feed("EN"), "");
  EXPECT_EQ(n.flush(), "EN");  // generation ended without the stop: the held text is released
  EXPECT_FALSE(n.matched());

  StopMatcher overlap({"abcd", "bc"});
  EXPECT_EQ(overlap.feed("xab"), "x");
  EXPECT_EQ(overlap.feed("c"), "a");  // "bc" occurs first (earliest start wins)
  EXPECT_TRUE(overlap.matched());

  StopMatcher none({});
  EXPECT_EQ(none.feed("anything END"), "anything END");

  StopMatcher utf8({"\xC3\xA9t\xC3\xA9"});  // "été"
  EXPECT_EQ(utf8.feed("caf\xC3\xA9"), "caf");
  EXPECT_EQ(utf8.feed(" "), "\xC3\xA9 ");
}

class ServeScheduler : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { engine_ = fixtures::open_tiny_engine(256); }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }

  struct Result {
    std::vector<std::string> text;
    std::vector<FinishReason> finish;
    std::vector<int32_t> completion_tokens;
    std::vector<std::vector<TokenLogprob>> logprobs;
    std::vector<std::string> errors;
  };

  static Result collect(const std::shared_ptr<RequestStream>& s) {
    Result r;
    const size_t n = static_cast<size_t>(s->n_choices());
    r.text.resize(n);
    r.finish.resize(n, FinishReason::None);
    r.completion_tokens.resize(n);
    r.logprobs.resize(n);
    r.errors.resize(n);
    std::vector<ChoiceEvent> events;
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (s->wait(events, 200ms)) {
      for (auto& e : events) {
        const size_t c = static_cast<size_t>(e.choice);
        EXPECT_EQ(r.finish[c], FinishReason::None) << "event after the finish of choice " << c;
        r.text[c] += e.text;
        for (auto& lp : e.logprobs) r.logprobs[c].push_back(lp);
        if (e.finish != FinishReason::None) {
          r.finish[c] = e.finish;
          r.completion_tokens[c] = e.completion_tokens;
          r.errors[c] = e.error;
        }
      }
      events.clear();
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "request did not finish within 60 s";
        s->cancel();
        break;
      }
    }
    return r;
  }

  static GenerationSpec spec(const std::string& prompt, int max_tokens, float temperature = 0.0f, uint64_t seed = 0) {
    GenerationSpec s;
    s.prompt = engine_->tokenizer().encode(prompt);
    s.max_tokens = max_tokens;
    s.sampling.temperature = temperature;
    s.sampling.seed = seed;
    s.ignore_eos = true;  // fixed lengths: the random fixture model may emit its EOS early
    return s;
  }

  static Result run_one(Scheduler& sched, GenerationSpec s) {
    std::shared_ptr<RequestStream> stream;
    EXPECT_EQ(sched.submit(std::move(s), stream), SubmitStatus::Accepted);
    if (!stream) return {};
    return collect(stream);
  }

  static Engine* engine_;
};

Engine* ServeScheduler::engine_ = nullptr;

TEST_F(ServeScheduler, StopStringAcrossTokenBoundaries) {
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  GenerationSpec base = spec("The quick brown fox jumps over", 40);
  base.top_logprobs = 0;  // to learn the token ids
  Result full = run_one(sched, base);
  ASSERT_EQ(full.finish[0], FinishReason::Length);
  const Tokenizer& tok = engine_->tokenizer();
  // Each token's piece, the text the stream decoder released for it, and where that starts.
  std::vector<std::string> pieces, released;
  std::vector<size_t> starts;
  StreamDecoder dec(tok);
  size_t pos = 0;
  for (const auto& lp : full.logprobs[0]) {
    starts.push_back(pos);
    pieces.push_back(tok.token_bytes(lp.token));
    released.push_back(dec.push(lp.token));
    pos += released.back().size();
  }
  auto ascii = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  };
  int tried = 0;
  for (size_t k = 2; k + 1 < pieces.size() && tried < 3; ++k) {
    if (!ascii(pieces[k]) || !ascii(pieces[k + 1]) || released[k] != pieces[k] || released[k + 1] != pieces[k + 1])
      continue;
    // The last byte of one token and the first byte of the next: matchable only across the boundary.
    const std::string stop = std::string(1, pieces[k].back()) + pieces[k + 1].front();
    if (full.text[0].find(stop) != starts[k + 1] - 1) continue;  // occurs earlier: not a boundary case
    ++tried;
    GenerationSpec s = base;
    s.top_logprobs = -1;
    s.stop = {"never-appears-here", stop};
    Result r = run_one(sched, s);
    EXPECT_EQ(r.finish[0], FinishReason::Stop) << "stop '" << stop << "'";
    EXPECT_EQ(r.text[0], full.text[0].substr(0, starts[k + 1] - 1)) << "stop '" << stop << "'";
    EXPECT_EQ(r.completion_tokens[0], static_cast<int32_t>(k + 2));  // ends on the token completing it
  }
  EXPECT_GT(tried, 0) << "no token boundary with ASCII on both sides in: " << full.text[0];
}

TEST_F(ServeScheduler, ChoicesMatchSingleRequestsWithConsecutiveSeeds) {
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  GenerationSpec s = spec("Once upon a time", 12, 0.9f, 1234);
  s.n = 3;
  Result multi = run_one(sched, s);
  for (int c = 0; c < 3; ++c) {
    GenerationSpec one = spec("Once upon a time", 12, 0.9f, 1234 + c);
    Result single = run_one(sched, one);
    EXPECT_EQ(multi.text[c], single.text[0]) << "choice " << c;
    EXPECT_EQ(multi.finish[c], FinishReason::Length);
    EXPECT_EQ(multi.completion_tokens[c], 12);
  }
  EXPECT_NE(multi.text[0], multi.text[1]) << "different seeds should give different samples";
}

TEST_F(ServeScheduler, LogprobsDescribeTheGreedyChoice) {
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  GenerationSpec s = spec("def main():", 10);
  s.top_logprobs = 5;
  Result r = run_one(sched, s);
  ASSERT_EQ(r.logprobs[0].size(), 10u);
  for (const auto& lp : r.logprobs[0]) {
    ASSERT_EQ(lp.top.size(), 5u);
    EXPECT_EQ(lp.top[0].first, lp.token) << "greedy picks the most likely token";
    EXPECT_EQ(lp.top[0].second, lp.logprob);
    EXPECT_LE(lp.logprob, 0.0f);
    double mass = 0;
    for (size_t i = 0; i < lp.top.size(); ++i) {
      mass += std::exp(lp.top[i].second);
      if (i > 0) {
        EXPECT_LE(lp.top[i].second, lp.top[i - 1].second);
      }
    }
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
}

TEST_F(ServeScheduler, LeanSamplingEqualsFullLogitsSampling) {
  std::vector<GenerationSpec> specs = {spec("alpha beta", 12), spec("alpha beta", 12, 0.8f, 7),
                                       spec("gamma", 12, 1.3f, 99)};
  specs[2].sampling.top_k = 40;
  specs[2].sampling.repetition_penalty = 1.2f;
  std::vector<std::string> texts[2];
  for (int lean = 0; lean < 2; ++lean) {
    SchedulerOptions o;
    o.lean_sampling = lean == 1;
    Scheduler sched(*engine_, o, nullptr);
    sched.start();
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (const auto& s : specs) {
      std::shared_ptr<RequestStream> st;
      ASSERT_EQ(sched.submit(s, st), SubmitStatus::Accepted);
      streams.push_back(st);
    }
    for (auto& st : streams) texts[lean].push_back(collect(st).text[0]);
  }
  EXPECT_EQ(texts[0], texts[1]);
}

TEST_F(ServeScheduler, CancelFreesTheSequence) {
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  std::shared_ptr<RequestStream> st;
  ASSERT_EQ(sched.submit(spec("Cancel me", 200), st), SubmitStatus::Accepted);
  std::vector<ChoiceEvent> events;
  while (events.empty() && st->wait(events, 100ms)) {
  }
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(sched.stats().running, 1);
  st->cancel();
  Result r = collect(st);
  EXPECT_EQ(r.finish[0], FinishReason::Cancelled);
  EXPECT_LT(r.completion_tokens[0], 200);
  EXPECT_EQ(sched.stats().running, 0);
}

// A long prompt is prefilled one chunk per tick while a running stream keeps decoding.
TEST_F(ServeScheduler, LongPromptInterleavesWithRunningStream) {
  Scheduler sched(*engine_, {}, nullptr);
  sched.start();
  std::shared_ptr<RequestStream> a, b;
  GenerationSpec a_spec = spec("Stream A", 60);
  a_spec.top_logprobs = 0;  // every token then makes an event, even one that adds no text yet
  ASSERT_EQ(sched.submit(a_spec, a), SubmitStatus::Accepted);
  std::vector<ChoiceEvent> ev;
  while (ev.empty() && a->wait(ev, 100ms)) {
  }
  GenerationSpec long_spec = spec("x", 4);
  long_spec.prompt.clear();
  for (int i = 0; i < 200; ++i) long_spec.prompt.push_back((i * 31 + 7) % 1000);  // 7 chunks of 32
  ASSERT_EQ(sched.submit(long_spec, b), SubmitStatus::Accepted);
  int a_tokens_before_b = 0;
  bool b_started = false;
  while (!b_started) {
    std::vector<ChoiceEvent> ea, eb;
    a->wait(ea, 1ms);
    for (auto& e : ea) a_tokens_before_b += static_cast<int>(e.logprobs.size());
    b->wait(eb, 1ms);
    b_started = !eb.empty();
  }
  // 7 prefill ticks, each with a decode step of A (the last one's events may be seen after B's).
  EXPECT_GE(a_tokens_before_b, 6);
  a->cancel();
  collect(a);
  collect(b);
}

TEST_F(ServeScheduler, QueueLimitAndShutdown) {
  SchedulerOptions o;
  o.max_batch = 1;
  o.max_queue = 1;
  Scheduler sched(*engine_, o, nullptr);
  // Not started: requests stay queued.
  std::shared_ptr<RequestStream> a, b;
  EXPECT_EQ(sched.submit(spec("one", 4), a), SubmitStatus::Accepted);
  EXPECT_EQ(sched.submit(spec("two", 4), b), SubmitStatus::QueueFull);
  EXPECT_EQ(b, nullptr);
  sched.start();
  sched.shutdown(0ms);
  Result r = collect(a);
  // Either it finished before the shutdown reached it or it was refused: never lost.
  EXPECT_NE(r.finish[0], FinishReason::None);
  if (r.finish[0] == FinishReason::Error) {
    EXPECT_EQ(r.errors[0], kShutdownMessage);
  }
  EXPECT_EQ(sched.submit(spec("three", 4), b), SubmitStatus::ShuttingDown);
}

}  // namespace
}  // namespace memra::serve

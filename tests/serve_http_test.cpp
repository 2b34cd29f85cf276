// The server end to end, in process on an ephemeral port, driven over HTTP: every route, streamed
// answers equal whole answers, the same request gives the same text alone and amid 15 concurrent
// different requests, a corpus of bad requests answered with 4xx while streams run intact, 429
// when the queue is full, disconnects cancel (streaming and not), bearer auth, shutdown.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "serve/http_lib.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "test_util.h"

namespace memra::serve {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

std::unique_ptr<Engine> open_tiny(int ctx) {
  EngineOptions o;
  o.device = "cpu";
  o.ctx = ctx;
  o.prefill_chunk = 32;
  return Engine::open(test::fixture("qwen35-tiny.f32.gguf"), o);
}

class TestServer {
 public:
  explicit TestServer(ServerOptions o, int ctx = 1024) : engine_(open_tiny(ctx)), server_(*engine_, with_name(o)) {
    port = server_.bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_.serve(); });
  }
  ~TestServer() {
    server_.stop(0ms);
    thread_.join();
  }
  HttpServer& server() { return server_; }
  int port = 0;

 private:
  static ServerOptions with_name(ServerOptions o) {
    if (o.model_name.empty()) o.model_name = "tiny";
    return o;
  }
  std::unique_ptr<Engine> engine_;
  HttpServer server_;
  std::thread thread_;
};

struct Reply {
  int status = -1;
  std::string body;
  std::string content_type;
  json j() const { return json::parse(body, nullptr, false); }
};

Reply request(int port, const std::string& method, const std::string& path, const std::string& body = {},
              const httplib::Headers& headers = {}) {
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120, 0);
  httplib::Result res = method == "GET" ? cli.Get(path.c_str(), headers)
                                        : cli.Post(path.c_str(), headers, body, "application/json");
  if (!res) return {-1, httplib::to_string(res.error()), {}};
  return {res->status, res->body, res->get_header_value("Content-Type")};
}

Reply post(int port, const std::string& path, const std::string& body, const httplib::Headers& h = {}) {
  return request(port, "POST", path, body, h);
}

// A parsed answer: per-choice text and finish reason, whether streamed or not.
struct Answer {
  std::vector<std::string> text;
  std::vector<std::string> finish;
  json usage;
  bool done = false;  // streamed: ended with [DONE]
  std::string error;
};

Answer parse_answer(const Reply& r, bool chat, bool stream) {
  Answer a;
  auto slot = [&](size_t i) {
    if (a.text.size() <= i) {
      a.text.resize(i + 1);
      a.finish.resize(i + 1);
    }
  };
  if (r.status != 200) {
    a.error = "HTTP " + std::to_string(r.status) + ": " + r.body;
    return a;
  }
  if (!stream) {
    json j = r.j();
    for (const auto& c : j["choices"]) {
      const size_t i = c["index"];
      slot(i);
      a.text[i] = chat ? (c["message"]["content"].is_string() ? c["message"]["content"].get<std::string>() : "")
                       : c["text"].get<std::string>();
      a.finish[i] = c["finish_reason"];
    }
    a.usage = j["usage"];
    return a;
  }
  size_t pos = 0;
  while ((pos = r.body.find("data: ", pos)) != std::string::npos) {
    const size_t end = r.body.find("\n\n", pos);
    const std::string payload = r.body.substr(pos + 6, end - pos - 6);
    pos = end + 2;
    if (payload == "[DONE]") {
      a.done = true;
      continue;
    }
    json c = json::parse(payload);
    if (c.contains("error")) {
      a.error = c["error"]["message"];
      continue;
    }
    if (c.contains("usage") && !c["usage"].is_null()) a.usage = c["usage"];
    for (const auto& ch : c["choices"]) {
      const size_t i = ch["index"];
      slot(i);
      if (chat) {
        if (ch["delta"].contains("content") && ch["delta"]["content"].is_string())
          a.text[i] += ch["delta"]["content"].get<std::string>();
      } else {
        a.text[i] += ch["text"].get<std::string>();
      }
      if (!ch["finish_reason"].is_null()) a.finish[i] = ch["finish_reason"];
    }
  }
  return a;
}

std::string chat_body(const std::string& content, const std::string& extra) {
  json m = json::array({json{{"role", "user"}, {"content", content}}});
  return "{\"model\": \"tiny\", \"messages\": " + m.dump() + (extra.empty() ? "" : ", " + extra) + "}";
}

// A plain socket client, for leaving in the middle of an answer.
class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~RawClient() { close(); }
  bool send_post(const std::string& path, const std::string& body) {
    const std::string req = "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" +
                            "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
    return connected_ && ::send(fd_, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size());
  }
  // Reads until `needle` has appeared `times` times in what was received, or the timeout.
  bool read_until(const std::string& needle, std::chrono::milliseconds timeout, int times = 1) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto count = [&] {
      int n = 0;
      for (size_t at = received_.find(needle); at != std::string::npos; at = received_.find(needle, at + 1)) ++n;
      return n;
    };
    while (count() < times) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
      char buf[4096];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return false;
      received_.append(buf, static_cast<size_t>(n));
    }
    return true;
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  const std::string& received() const { return received_; }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string received_;
};

template <typename Pred>
bool eventually(Pred p, std::chrono::milliseconds timeout = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!p()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.scheduler.max_batch = 16;
    o.scheduler.max_queue = 32;
    o.max_body_bytes = 1 << 20;
    server_ = new TestServer(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port; }
  static TestServer* server_;
};

TestServer* ServeHttp::server_ = nullptr;

TEST_F(ServeHttp, Routes) {
  Reply health = request(port(), "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.j()["status"], "ok");

  Reply models = request(port(), "GET", "/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(models.j()["object"], "list");
  EXPECT_EQ(models.j()["data"][0]["id"], "tiny");
  EXPECT_EQ(models.j()["data"][0]["object"], "model");

  Reply nf = request(port(), "GET", "/v1/nothing");
  EXPECT_EQ(nf.status, 404);
  EXPECT_TRUE(nf.j()["error"]["message"].is_string());

  Reply c = post(port(), "/v1/completions", R"({"model": "tiny", "prompt": "def f(x):", "max_tokens": 5, "temperature": 0})");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(c.content_type, "application/json");
  json cj = c.j();
  EXPECT_EQ(cj["object"], "text_completion");
  EXPECT_EQ(cj["model"], "tiny");
  EXPECT_TRUE(cj["id"].get<std::string>().rfind("cmpl-", 0) == 0);
  EXPECT_EQ(cj["usage"]["total_tokens"], cj["usage"]["prompt_tokens"].get<int>() + cj["usage"]["completion_tokens"].get<int>());

  Reply ch = post(port(), "/v1/chat/completions", chat_body("Hello", R"("max_tokens": 5, "temperature": 0)"));
  ASSERT_EQ(ch.status, 200) << ch.body;
  json chj = ch.j();
  EXPECT_EQ(chj["object"], "chat.completion");
  EXPECT_EQ(chj["choices"][0]["message"]["role"], "assistant");
  EXPECT_TRUE(chj["choices"][0]["finish_reason"] == "length" || chj["choices"][0]["finish_reason"] == "stop");

  Reply metrics = request(port(), "GET", "/metrics");
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("memra_requests_total{endpoint=\"/v1/completions\",status=\"200\"}"), std::string::npos);
  EXPECT_NE(metrics.body.find("memra_requests_total{endpoint=\"other\",status=\"404\"}"), std::string::npos);
  for (const char* name : {"memra_prompt_tokens_total", "memra_generation_tokens_total", "memra_queue_depth",
                           "memra_running_sequences", "memra_time_to_first_token_seconds_bucket{le=\"+Inf\"}",
                           "memra_time_per_output_token_seconds_count"})
    EXPECT_NE(metrics.body.find(name), std::string::npos) << name;
}

// Requests of many shapes; each is its own reference when run alone.
struct Case {
  bool chat;
  bool stream;
  std::string body;
};

std::vector<Case> mixed_cases() {
  std::vector<Case> cs;
  const std::string long_prompt = [] {
    std::string s;
    for (int i = 0; i < 25; ++i) s += "word" + std::to_string(i) + " ";
    return s;
  }();
  cs.push_back({true, false, chat_body("Tell me a story", R"("max_tokens": 20, "temperature": 0, "ignore_eos": true)")});
  cs.push_back({true, false, chat_body("Tell me a story", R"("max_tokens": 20, "temperature": 0.9, "seed": 77, "ignore_eos": true)")});
  for (int i = 0; i < 15; ++i) {
    const bool chat = i % 3 != 2;
    const bool stream = i % 2 == 0;
    const std::string temp = i % 4 == 0 ? "0" : "1.1";
    const std::string extra = "\"max_tokens\": " + std::to_string(4 + (i * 5) % 13) + ", \"temperature\": " + temp +
                              ", \"seed\": " + std::to_string(1000 + i) + (i % 5 == 1 ? ", \"n\": 2" : "") +
                              (i % 6 == 3 ? ", \"top_k\": 20, \"presence_penalty\": 0.5" : "") +
                              (stream && i % 4 == 2 ? ", \"stream_options\": {\"include_usage\": true}" : "") +
                              (stream ? ", \"stream\": true" : "") + ", \"ignore_eos\": " + (i % 3 == 0 ? "true" : "false");
    const std::string prompt = (i % 4 == 1 ? long_prompt : "") + "Question " + std::to_string(i) + ": why?";
    if (chat) cs.push_back({true, stream, chat_body(prompt, extra)});
    else cs.push_back({false, stream, "{\"model\": \"tiny\", \"prompt\": " + json(prompt).dump() + ", " + extra + "}"});
  }
  return cs;
}

Answer run_case(int port, const Case& c) {
  return parse_answer(post(port, c.chat ? "/v1/chat/completions" : "/v1/completions", c.body), c.chat, c.stream);
}

TEST_F(ServeHttp, SameTextAloneAndAmidFifteenConcurrentRequests) {
  const std::vector<Case> cases = mixed_cases();
  std::vector<Answer> alone;
  for (const auto& c : cases) {
    alone.push_back(run_case(port(), c));
    ASSERT_TRUE(alone.back().error.empty()) << alone.back().error;
    if (c.stream) {
      EXPECT_TRUE(alone.back().done);
    }
  }
  std::vector<Answer> together(cases.size());
  std::atomic<int> ready{0};
  std::atomic<bool> running{true};
  int peak = 0;
  std::thread watch([&] {
    while (running) {
      peak = std::max(peak, server_->server().stats().running);
      std::this_thread::sleep_for(1ms);
    }
  });
  std::vector<std::thread> threads;
  for (size_t i = 0; i < cases.size(); ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < static_cast<int>(cases.size())) std::this_thread::yield();
      together[i] = run_case(port(), cases[i]);
    });
  }
  for (auto& t : threads) t.join();
  running = false;
  watch.join();
  EXPECT_GE(peak, 3) << "the requests did not overlap";
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_TRUE(together[i].error.empty()) << together[i].error;
    EXPECT_EQ(together[i].text, alone[i].text) << "request " << i << ": " << cases[i].body;
    EXPECT_EQ(together[i].finish, alone[i].finish) << "request " << i;
  }
  EXPECT_EQ(alone[0].finish[0], "length");
  EXPECT_FALSE(alone[0].text[0].empty());
}

TEST_F(ServeHttp, StreamedTextEqualsWholeText) {
  for (bool chat : {true, false}) {
    for (const std::string sampling : {R"("temperature": 0)", R"("temperature": 1.0, "seed": 5, "top_p": 0.9)"}) {
      const std::string extra = sampling + R"(, "max_tokens": 24, "n": 2, "ignore_eos": true, "logprobs": )" +
                                (chat ? "true, \"top_logprobs\": 2" : "2");
      const std::string body = chat ? chat_body("Stream or not", extra)
                                    : R"({"model": "tiny", "prompt": "Stream or not", )" + extra + "}";
      const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
      Reply whole = post(port(), path, body);
      ASSERT_EQ(whole.status, 200) << whole.body;
      Reply streamed = post(port(), path, body.substr(0, body.size() - 1) +
                                              R"(, "stream": true, "stream_options": {"include_usage": true}})");
      ASSERT_EQ(streamed.status, 200) << streamed.body;
      EXPECT_EQ(streamed.content_type, "text/event-stream");
      Answer a = parse_answer(whole, chat, false), b = parse_answer(streamed, chat, true);
      ASSERT_EQ(a.text.size(), 2u);
      EXPECT_EQ(a.text, b.text);
      EXPECT_EQ(a.finish, b.finish);
      EXPECT_TRUE(b.done);
      // The streamed request repeats the prompt, so it comes from the prefix cache (whole, with
      // its logits) and reports so; the rest of the usage is the same.
      EXPECT_EQ(b.usage["prompt_tokens_details"]["cached_tokens"], b.usage["prompt_tokens"]);
      a.usage.erase("prompt_tokens_details");
      b.usage.erase("prompt_tokens_details");
      EXPECT_EQ(a.usage, b.usage);
      EXPECT_EQ(a.usage["completion_tokens"], 48);
      // Logprobs: one entry per generated token in the whole answer.
      json wj = whole.j();
      const size_t n_lp = chat ? wj["choices"][0]["logprobs"]["content"].size()
                               : wj["choices"][0]["logprobs"]["tokens"].size();
      EXPECT_EQ(n_lp, 24u);
    }
  }
}

TEST_F(ServeHttp, StopStringsEndTheAnswer) {
  const std::string base = R"({"model": "tiny", "prompt": "Once upon", "max_tokens": 30, "temperature": 0, "ignore_eos": true)";
  Answer full = parse_answer(post(port(), "/v1/completions", base + "}"), false, false);
  ASSERT_EQ(full.text.size(), 1u);
  ASSERT_GE(full.text[0].size(), 12u);
  const std::string stop = full.text[0].substr(8, 3);
  const std::string expect = full.text[0].substr(0, full.text[0].find(stop));
  for (bool stream : {false, true}) {
    const std::string body = base + ", \"stop\": [" + json(stop).dump() + "]" + (stream ? ", \"stream\": true}" : "}");
    Answer a = parse_answer(post(port(), "/v1/completions", body), false, stream);
    ASSERT_EQ(a.text.size(), 1u) << a.error;
    EXPECT_EQ(a.text[0], expect);
    EXPECT_EQ(a.finish[0], "stop");
  }
}

TEST_F(ServeHttp, BadRequestsWhileStreamsRun) {
  std::vector<Case> streams;
  for (int i = 0; i < 3; ++i)
    streams.push_back({true, true,
                       chat_body("Keep going " + std::to_string(i),
                                 R"("max_tokens": 80, "temperature": 0.7, "seed": )" + std::to_string(i) +
                                     R"(, "ignore_eos": true, "stream": true)")});
  std::vector<Answer> alone;
  for (const auto& c : streams) alone.push_back(run_case(port(), c));

  std::vector<Answer> during(streams.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < streams.size(); ++i)
    threads.emplace_back([&, i] { during[i] = run_case(port(), streams[i]); });
  EXPECT_TRUE(eventually([] { return server_->server().stats().running > 0; }));

  const std::string big(1500000, 'x');
  struct Bad {
    std::string path, body;
    int status;
  };
  const std::vector<Bad> bad = {
      {"/v1/chat/completions", "{", 400},
      {"/v1/chat/completions", "null", 400},
      {"/v1/chat/completions", R"({"messages": []})", 400},
      {"/v1/chat/completions", R"({"messages": [{"role": "user", "content": 1}]})", 400},
      {"/v1/chat/completions", chat_body("x", R"("model": "nope")"), 404},
      {"/v1/chat/completions", chat_body("x", R"("temperature": -0.5)"), 400},
      {"/v1/chat/completions", chat_body("x", R"("top_p": 7)"), 400},
      {"/v1/chat/completions", chat_body("x", R"("n": 1000)"), 400},
      {"/v1/chat/completions", chat_body("x", R"("max_tokens": -1)"), 400},
      {"/v1/chat/completions", chat_body("x", R"("max_tokens": 1e30)"), 400},
      {"/v1/chat/completions", chat_body("x", R"("logit_bias": {"1": "a"})"), 400},
      {"/v1/chat/completions", chat_body("x", R"("stop": [1, 2])"), 400},
      {"/v1/chat/completions", chat_body(std::string(6000, 'y'), ""), 400},  // longer than the context
      {"/v1/chat/completions", "{\"messages\": " + std::string(5000, '[') + std::string(5000, ']') + "}", 400},
      {"/v1/chat/completions", "{\"messages\": \"" + big + "\"}", 413},
      {"/v1/completions", R"({"prompt": {"a": 1}})", 400},
      {"/v1/completions", R"({"prompt": [-1]})", 400},
      {"/v1/completions", R"({"prompt": "x", "max_tokens": 5000})", 400},
      {"/v1/completions", "\xff\xfe garbage", 400},
      {"/v1/models", "{}", 404},  // POST to a GET route
  };
  for (const auto& b : bad) {
    Reply r = post(port(), b.path, b.body);
    EXPECT_EQ(r.status, b.status) << b.path << " " << b.body.substr(0, 80) << " -> " << r.body;
    json j = r.j();
    EXPECT_TRUE(!j.is_discarded() && j.contains("error") && j["error"]["message"].is_string())
        << b.body.substr(0, 80) << " -> " << r.body.substr(0, 200);
  }
  for (auto& t : threads) t.join();
  for (size_t i = 0; i < streams.size(); ++i) {
    EXPECT_TRUE(during[i].error.empty()) << during[i].error;
    EXPECT_TRUE(during[i].done);
    EXPECT_EQ(during[i].text, alone[i].text) << "stream " << i;
    EXPECT_EQ(during[i].finish, std::vector<std::string>{"length"});
  }
}

// The tiny model can finish 900 tokens before any server notices a closed socket, so this server
// paces its ticks (4 ms: 900 tokens take 3.6 s or more) to make the disconnect observable.
TEST(ServeHttpDisconnect, CancelsStreamingAndWholeRequests) {
  ServerOptions o;
  o.scheduler.min_tick_interval = std::chrono::milliseconds(4);
  TestServer s(o);
  Metrics& m = s.server().metrics();
  const int64_t before = m.generated_tokens();
  {
    RawClient c(s.port);
    ASSERT_TRUE(c.send_post("/v1/chat/completions",
                            chat_body("Go on forever", R"("max_tokens": 900, "ignore_eos": true, "stream": true)")));
    ASSERT_TRUE(c.read_until("\"role\"", 10s)) << c.received();  // the stream has begun
    ASSERT_TRUE(eventually([&] { return s.server().stats().running == 1; }));
    // The role event, then a token's (events may or may not share an HTTP chunk: count them).
    ASSERT_TRUE(c.read_until("data: {", 30s, 2)) << c.received();
  }  // closed
  EXPECT_TRUE(eventually([&] { return s.server().stats().running == 0; }));
  EXPECT_LT(m.generated_tokens() - before, 900) << "the stream ran to the end despite the disconnect";

  const int64_t before2 = m.generated_tokens();
  const uint64_t closed = m.requests("/v1/chat/completions", 499);
  {
    RawClient c(s.port);
    ASSERT_TRUE(c.send_post("/v1/chat/completions", chat_body("Whole answer", R"("max_tokens": 900, "ignore_eos": true)")));
    ASSERT_TRUE(eventually([&] { return s.server().stats().running == 1; }));
  }
  EXPECT_TRUE(eventually([&] { return s.server().stats().running == 0; }));
  EXPECT_LT(m.generated_tokens() - before2, 900);
  EXPECT_TRUE(eventually([&] { return m.requests("/v1/chat/completions", 499) == closed + 1; }));
}

TEST(ServeHttpLimits, QueueFullGives429AndShutdownEndsStreams) {
  ServerOptions o;
  o.scheduler.max_batch = 1;
  o.scheduler.max_queue = 1;
  o.scheduler.min_tick_interval = std::chrono::milliseconds(4);  // the running stream outlasts the checks
  TestServer s(o);
  const std::string long_stream = chat_body("Long", R"("max_tokens": 900, "ignore_eos": true, "stream": true)");
  RawClient running(s.port);
  ASSERT_TRUE(running.send_post("/v1/chat/completions", long_stream));
  ASSERT_TRUE(eventually([&] { return s.server().stats().running == 1; }));
  RawClient queued(s.port);
  ASSERT_TRUE(queued.send_post("/v1/chat/completions", long_stream));
  ASSERT_TRUE(eventually([&] { return s.server().stats().queued == 1; }));

  Reply busy = post(s.port, "/v1/chat/completions", chat_body("One more", R"("max_tokens": 2)"));
  EXPECT_EQ(busy.status, 429);
  EXPECT_EQ(busy.j()["error"]["type"], "rate_limit_error");

  // The queued client leaves: its request is dropped from the queue.
  queued.close();
  EXPECT_TRUE(eventually([&] { return s.server().stats().queued == 0; }));
  EXPECT_EQ(s.server().stats().running, 1);

  // Shutdown with no grace: the running stream ends with an error event and [DONE].
  s.server().stop(0ms);
  EXPECT_TRUE(running.read_until("data: [DONE]", 10s)) << running.received().substr(0, 300);
  EXPECT_NE(running.received().find(kShutdownMessage), std::string::npos);
  EXPECT_EQ(s.server().stats().running, 0);
}

TEST(ServeHttpLimits, BearerAuth) {
  ServerOptions o;
  o.api_key = "sekret";
  TestServer s(o);
  const std::string body = R"({"prompt": "a", "max_tokens": 1})";
  Reply none = post(s.port, "/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.j()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(post(s.port, "/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(post(s.port, "/v1/completions", body, {{"Authorization", "sekret"}}).status, 401);
  EXPECT_EQ(request(s.port, "GET", "/v1/models").status, 401);
  EXPECT_EQ(post(s.port, "/v1/completions", body, {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(request(s.port, "GET", "/v1/models", {}, {{"Authorization", "Bearer sekret"}}).status, 200);
  EXPECT_EQ(request(s.port, "GET", "/health").status, 200);
}

}  // namespace
}  // namespace memra::serve

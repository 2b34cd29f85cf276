// The server under hostile clients, over raw sockets: every framing trick answered with its 4xx
// before a worker sees it, bodies bounded however they are framed, slow and idle connections that
// cost no worker (/health stays fast), deadlines, half-closed clients answered, and the API rows
// (tokenize, models/{id}, CORS, Host check, content type, auth scheme, timeouts, --max-queue 0).
// Each test runs in well under two seconds (CI runs them under ASan).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "serve/http_server.h"
#include "test_util.h"

namespace memra::serve {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

class Server {
 public:
  explicit Server(ServerOptions o) {
    EngineOptions eo;
    eo.device = "cpu";
    eo.ctx = 1024;
    eo.prefill_chunk = 32;
    engine_ = Engine::open(test::fixture("qwen35-tiny.f32.gguf"), eo);
    if (o.model_name.empty()) o.model_name = "tiny";
    if (o.max_body_bytes == (size_t(8) << 20)) o.max_body_bytes = 1 << 20;
    server_ = std::make_unique<HttpServer>(*engine_, o);
    port = server_->bind("127.0.0.1", 0);
    thread_ = std::thread([this] { server_->serve(); });
  }
  ~Server() {
    server_->stop(0ms);
    thread_.join();
  }
  HttpServer& server() { return *server_; }
  int port = 0;

 private:
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<HttpServer> server_;
  std::thread thread_;
};

// A plain socket: sends whatever bytes a test wants, reads what comes back.
class Sock {
 public:
  explicit Sock(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  ~Sock() {
    if (fd_ >= 0) close(fd_);
  }
  bool ok() const { return ok_; }
  bool send(const std::string& s) {
    size_t at = 0;
    while (at < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + at, s.size() - at, MSG_NOSIGNAL);
      if (n <= 0) return false;
      at += static_cast<size_t>(n);
    }
    return true;
  }
  void shut_write() { shutdown(fd_, SHUT_WR); }
  // One read of what has arrived (waiting up to `timeout` for something).
  void read_some(std::chrono::milliseconds timeout) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return;
    char buf[65536];
    const ssize_t n = recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) closed_ = true;
    else got_.append(buf, static_cast<size_t>(n));
  }
  // Reads until `needle` appears (or, with an empty needle, until end-of-file), or the timeout.
  std::string read_until(const std::string& needle, std::chrono::milliseconds timeout = 3000ms) {
    const auto deadline = Clock::now() + timeout;
    while (needle.empty() || got_.find(needle) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[65536];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      got_.append(buf, static_cast<size_t>(n));
    }
    return got_;
  }
  // Where the first final (non-1xx) answer read so far starts, or npos.
  size_t final_at() const {
    size_t at = 0;
    while (got_.compare(at, 10, "HTTP/1.1 1") == 0) {
      const size_t end = got_.find("\r\n\r\n", at);
      if (end == std::string::npos) return std::string::npos;
      at = end + 4;
    }
    return got_.compare(at, 9, "HTTP/1.1 ") == 0 ? at : std::string::npos;
  }
  int status() const {
    const size_t at = final_at();
    return at == std::string::npos ? -1 : std::atoi(got_.c_str() + at + 9);
  }
  // Reads one whole final answer with a Content-Length and returns its status.
  int answer(std::chrono::milliseconds timeout = 3000ms) {
    const auto deadline = Clock::now() + timeout;
    auto whole = [&] {
      const size_t at = final_at();
      if (at == std::string::npos) return false;
      const size_t head_end = got_.find("\r\n\r\n", at);
      if (head_end == std::string::npos) return false;
      const size_t cl = got_.find("Content-Length: ", at);
      if (cl == std::string::npos || cl > head_end) return true;
      return got_.size() >= head_end + 4 + std::stoul(got_.substr(cl + 16));
    };
    while (!whole() && !closed_ && Clock::now() < deadline) read_some(20ms);
    return status();
  }
  const std::string& got() const { return got_; }
  std::string body() const {
    const size_t at = final_at();
    const size_t end = at == std::string::npos ? at : got_.find("\r\n\r\n", at);
    return end == std::string::npos ? "" : got_.substr(end + 4);
  }
  bool closed() const { return closed_; }

 private:
  int fd_ = -1;
  bool ok_ = false;
  bool closed_ = false;
  std::string got_;
};

std::string post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path + " HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n" + extra_headers +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string get(const std::string& path, const std::string& extra_headers = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n" + extra_headers + "\r\n";
}

int status_of(int port, const std::string& request) {
  Sock s(port);
  s.send(request);
  return s.answer();
}

const std::string kTokenize = R"({"prompt": "hello world"})";

class ServeHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions o;
    o.scheduler.max_batch = 4;
    o.scheduler.max_queue = 4;
    o.head_timeout = 1000ms;
    o.body_timeout = 400ms;
    server_ = new Server(o);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static int port() { return server_->port; }
  static Server* server_;
};

Server* ServeHostile::server_ = nullptr;

TEST_F(ServeHostile, FramingTricksAreRefused) {
  struct Case {
    const char* what;
    std::string request;
    int status;
  };
  const std::string hdr = "POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n";
  const std::vector<Case> cases = {
      {"CL and TE", hdr + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
      {"two CL", hdr + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400},
      {"signed CL", hdr + "Content-Length: +2\r\n\r\n{}", 400},
      {"TE gzip", hdr + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
      {"no length", hdr + "\r\n{}", 411},
      {"gzip body", hdr + "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", 415},
      {"CL over the limit", hdr + "Content-Length: 2000000\r\n\r\n", 413},
      {"space before colon", hdr + "Content-Length : 2\r\n\r\n{}", 400},
      {"folded header", hdr + "X-A: 1\r\n  2\r\nContent-Length: 2\r\n\r\n{}", 400},
      {"HTTP/2.0", "GET /health HTTP/2.0\r\nHost: localhost\r\n\r\n", 505},
      {"bad chunk size", hdr + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400},
      {"chunk without CRLF", hdr + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 400},
      {"long target", "GET /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: localhost\r\n\r\n", 414},
      {"many headers", [] {
         std::string r = "GET /health HTTP/1.1\r\nHost: localhost\r\n";
         for (int i = 0; i < 150; ++i) r += "X-" + std::to_string(i) + ": 1\r\n";
         return r + "\r\n";
       }(), 431},
      {"large header", "GET /health HTTP/1.1\r\nHost: localhost\r\nX-Big: " + std::string(40000, 'b') + "\r\n\r\n", 431},
      {"odd expectation", hdr + "Expect: magic\r\nContent-Length: 2\r\n\r\n{}", 417},
  };
  for (const auto& c : cases) {
    Sock s(port());
    ASSERT_TRUE(s.ok());
    s.send(c.request);
    EXPECT_EQ(s.answer(), c.status) << c.what << ": " << s.got().substr(0, 200);
    const json j = json::parse(s.body(), nullptr, false);
    EXPECT_TRUE(!j.is_discarded() && j["error"]["message"].is_string()) << c.what << ": " << s.body();
    s.read_until("", 2000ms);
    EXPECT_TRUE(s.closed()) << c.what << ": the connection stays open after a framing error";
  }
}

TEST_F(ServeHostile, ChunkedBodiesAreDecodedAndBounded) {
  // A well-formed chunked body, with an extension and a trailer, is the same request.
  const std::string body = kTokenize;
  Sock ok(port());
  ok.send("POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
          fmt::format("{:x};ext=1\r\n{}\r\n{:x}\r\n{}\r\n0\r\nX-Trailer: t\r\n\r\n", 5, body.substr(0, 5),
                      body.size() - 5, body.substr(5)));
  ASSERT_EQ(ok.answer(), 200) << ok.got();
  Sock plain(port());
  plain.send(post("/tokenize", body));
  ASSERT_EQ(plain.answer(), 200);
  EXPECT_EQ(json::parse(ok.body())["tokens"], json::parse(plain.body())["tokens"]);

  // 4 MiB in 64 KiB chunks against a 1 MiB limit: 413 before the rest is read.
  Sock big(port());
  big.send("POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string chunk = fmt::format("{:x}\r\n{}\r\n", 65536, std::string(65536, 'x'));
  for (int i = 0; i < 64; ++i)
    if (!big.send(chunk)) break;  // the server may have stopped reading
  EXPECT_EQ(big.answer(), 413) << big.got().substr(0, 200);
}

TEST_F(ServeHostile, RangeIsIgnoredAndPipeliningAndContinueWork) {
  Sock s(port());
  s.send(get("/v1/models", "Range: bytes=0-3\r\n"));
  EXPECT_EQ(s.answer(), 200);
  EXPECT_EQ(json::parse(s.body())["data"][0]["id"], "tiny");

  // Two requests in one write: two answers, in order, on one connection.
  Sock p(port());
  p.send(get("/health") + post("/tokenize", kTokenize));
  p.read_until("\"count\"");
  EXPECT_NE(p.got().find("\"status\""), std::string::npos);
  EXPECT_LT(p.got().find("\"status\""), p.got().find("\"count\""));

  // Expect: 100-continue: the interim answer comes before the body is sent.
  Sock e(port());
  e.send("POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"
         "Content-Length: " + std::to_string(kTokenize.size()) + "\r\n\r\n");
  EXPECT_NE(e.read_until("100 Continue").find("HTTP/1.1 100 Continue"), std::string::npos);
  e.send(kTokenize);
  EXPECT_EQ(e.answer(), 200);
}

TEST_F(ServeHostile, SlowAndIdleConnectionsHoldNoWorker) {
  // More slow and idle sockets than the server has workers (4 + 4 + 16).
  std::vector<std::unique_ptr<Sock>> slow, idle;
  for (int i = 0; i < 150; ++i) {
    slow.push_back(std::make_unique<Sock>(port()));
    slow.back()->send("GET /health HTTP/1.1\r\nHost: loc");
    idle.push_back(std::make_unique<Sock>(port()));
    idle.back()->send(get("/health"));
  }
  for (auto& s : idle) s->answer();  // now idle keep-alive connections
  EXPECT_TRUE(server_->server().connections() >= 300);
  for (int i = 0; i < 5; ++i) {
    const auto t0 = Clock::now();
    EXPECT_EQ(status_of(port(), get("/health")), 200);
    EXPECT_LT(Clock::now() - t0, 100ms);
  }
  // The head deadline (1 s here): the slow ones get 408 and are closed.
  for (auto& s : slow) s->read_until("", 2000ms);
  EXPECT_EQ(slow.front()->status(), 408) << slow.front()->got();
  EXPECT_TRUE(slow.front()->closed());
}

TEST_F(ServeHostile, SlowBodyGets408) {
  Sock s(port());
  s.send("POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
  EXPECT_EQ(s.answer(1500ms), 408) << s.got();
}

TEST_F(ServeHostile, HalfClosedClientGetsItsAnswer) {
  for (bool stream : {false, true}) {
    Sock s(port());
    s.send(post("/v1/chat/completions",
                std::string(R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "temperature": 0)") +
                    (stream ? R"(, "stream": true})" : "}")));
    s.shut_write();
    s.read_until("", 5000ms);
    EXPECT_EQ(s.status(), 200) << s.got().substr(0, 300);
    EXPECT_NE(s.got().find(stream ? "data: [DONE]" : "\"chat.completion\""), std::string::npos) << s.got();
  }
}

TEST_F(ServeHostile, BrowserFacingChecks) {
  // text/plain (a "simple" cross-origin request, no preflight) is not JSON to us.
  EXPECT_EQ(status_of(port(), "POST /tokenize HTTP/1.1\r\nHost: localhost\r\nContent-Type: text/plain\r\nContent-Length: " +
                                  std::to_string(kTokenize.size()) + "\r\n\r\n" + kTokenize),
            415);
  EXPECT_EQ(status_of(port(), post("/tokenize", kTokenize)), 200);
  // Loopback without a key: only loopback names in Host (DNS rebinding).
  for (const char* host : {"localhost", "localhost:8080", "127.0.0.1:1", "[::1]:80", "LOCALHOST"})
    EXPECT_EQ(status_of(port(), "GET /v1/models HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n"), 200) << host;
  for (const char* host : {"evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "localhost:80x"})
    EXPECT_EQ(status_of(port(), "GET /v1/models HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n"), 403) << host;
  EXPECT_EQ(status_of(port(), "GET /v1/models HTTP/1.1\r\n\r\n"), 403);  // HTTP/1.1 without Host
  // No --cors-origins: no preflight passes.
  EXPECT_EQ(status_of(port(), "OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: http://a.example\r\n\r\n"),
            403);
}

TEST_F(ServeHostile, ApiRows) {
  Sock t(port());
  t.send(post("/tokenize", R"({"prompt": "hello world", "return_token_strs": true})"));
  ASSERT_EQ(t.answer(), 200);
  const json tj = json::parse(t.body());
  EXPECT_EQ(tj["count"], tj["tokens"].size());
  EXPECT_EQ(tj["max_model_len"], 1024);
  EXPECT_EQ(tj["token_strs"].size(), tj["tokens"].size());

  Sock d(port());
  d.send(post("/detokenize", json{{"tokens", tj["tokens"]}}.dump()));
  ASSERT_EQ(d.answer(), 200);
  EXPECT_EQ(json::parse(d.body())["prompt"], "hello world");
  EXPECT_EQ(json::parse(d.body())["content"], "hello world");

  Sock c(port());  // llama-server's spelling
  c.send(post("/tokenize", R"({"content": "hello world"})"));
  ASSERT_EQ(c.answer(), 200);
  EXPECT_EQ(json::parse(c.body())["tokens"], tj["tokens"]);

  EXPECT_EQ(status_of(port(), post("/detokenize", R"({"tokens": [-1]})")), 400);
  EXPECT_EQ(status_of(port(), post("/tokenize", R"({"prompt": 3})")), 400);

  Sock m(port());
  m.send(get("/v1/models/tiny"));
  ASSERT_EQ(m.answer(), 200);
  EXPECT_EQ(json::parse(m.body())["id"], "tiny");
  EXPECT_EQ(json::parse(m.body())["object"], "model");
  EXPECT_EQ(status_of(port(), get("/v1/models/other")), 404);

  // Template variables other than the allowed flags.
  EXPECT_EQ(status_of(port(), post("/v1/chat/completions",
                                   R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1,
                                       "chat_template_kwargs": {"bos_token": "X"}})")),
            400);
  EXPECT_EQ(status_of(port(), post("/v1/chat/completions",
                                   R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1,
                                       "chat_template_kwargs": {"enable_thinking": false}})")),
            200);
}

TEST_F(ServeHostile, OversizedPromptsAreRefusedBeforeTokenizing) {
  // 900 KB of text cannot fit 1024 tokens: refused from its size alone, fast.
  const std::string text(900000, 'a');
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {"/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", text}}}}}.dump()},
           {"/v1/completions", json{{"prompt", text}}.dump()}}) {
    const auto t0 = Clock::now();
    Sock s(port());
    s.send(post(path, body));
    EXPECT_EQ(s.answer(), 400) << path;
    EXPECT_EQ(json::parse(s.body())["error"]["code"], "context_length_exceeded");
    EXPECT_LT(Clock::now() - t0, 1000ms);
  }
}

TEST(ServeHostileOptions, KeyCorsTimeoutAndEmptyQueue) {
  ServerOptions o;
  o.api_key = "sekret";
  o.cors_origins = {"http://app.example"};
  o.scheduler.max_batch = 2;
  o.scheduler.max_queue = 0;
  o.scheduler.min_tick_interval = 4ms;
  o.request_timeout = 300ms;
  Server s(o);
  const std::string chat = R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})";
  // The scheme is case-insensitive; with a key, any Host is served.
  for (const char* auth : {"Bearer sekret", "bearer sekret", "BEARER  sekret"})
    EXPECT_EQ(status_of(s.port, "GET /v1/models HTTP/1.1\r\nHost: my.server\r\nAuthorization: " + std::string(auth) + "\r\n\r\n"),
              200)
        << auth;
  EXPECT_EQ(status_of(s.port, get("/v1/models", "Authorization: Basic sekret\r\n")), 401);
  // --max-queue 0 on an idle server: the request runs.
  EXPECT_EQ(status_of(s.port, post("/v1/chat/completions", chat, "Authorization: Bearer sekret\r\n")), 200);

  // CORS: the allowed origin gets a preflight and its header on answers; another gets neither.
  Sock pre(s.port);
  pre.send("OPTIONS /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nOrigin: http://app.example\r\n"
           "Access-Control-Request-Method: POST\r\n\r\n");
  EXPECT_EQ(pre.answer(), 204);
  EXPECT_NE(pre.got().find("Access-Control-Allow-Origin: http://app.example"), std::string::npos) << pre.got();
  EXPECT_NE(pre.got().find("Access-Control-Allow-Headers: Authorization, Content-Type"), std::string::npos);
  Sock other(s.port);
  other.send("OPTIONS /v1/models HTTP/1.1\r\nHost: localhost\r\nOrigin: http://evil.example\r\n\r\n");
  EXPECT_EQ(other.answer(), 403);
  Sock simple(s.port);
  simple.send(get("/v1/models", "Origin: http://app.example\r\nAuthorization: Bearer sekret\r\n"));
  EXPECT_EQ(simple.answer(), 200);
  EXPECT_NE(simple.got().find("Access-Control-Allow-Origin: http://app.example"), std::string::npos);

  // The request timeout (300 ms; 900 tokens take 3.6 s here): 504, or an error event in a stream.
  const std::string long_chat = R"({"messages": [{"role": "user", "content": "go"}], "max_tokens": 900, "ignore_eos": true)";
  Sock whole(s.port);
  whole.send(post("/v1/chat/completions", long_chat + "}", "Authorization: Bearer sekret\r\n"));
  EXPECT_EQ(whole.answer(3000ms), 504) << whole.got().substr(0, 300);
  Sock streamed(s.port);
  streamed.send(post("/v1/chat/completions", long_chat + R"(, "stream": true})", "Authorization: Bearer sekret\r\n"));
  streamed.read_until("data: [DONE]", 3000ms);
  EXPECT_NE(streamed.got().find("longer than the server's limit"), std::string::npos) << streamed.got().substr(0, 300);
}

}  // namespace
}  // namespace memra::serve

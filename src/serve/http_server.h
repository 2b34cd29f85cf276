// The HTTP front end of `memra serve`: OpenAI-compatible routes, talking to the scheduler through
// request streams. Connections are read by an event loop (serve/http_front.h: limits, deadlines,
// framing); complete requests go to cpp-httplib's router and response writer on a worker thread.
//
//   POST /v1/chat/completions, POST /v1/completions   (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /v1/models/{id}
//   POST /tokenize, POST /detokenize                   (vLLM's fields; llama-server's accepted too)
//   GET  /health, GET /metrics                         (Prometheus text)
//   OPTIONS *                                          (CORS preflight, with cors_origins)
//
// With an API key, every route but /health and /metrics requires "Authorization: Bearer <key>"
// (401 otherwise; the scheme is case-insensitive). Without a key on a loopback address, the Host
// header must name the loopback (localhost, 127.0.0.1, [::1], any port): a web page that rebinds
// its own name to 127.0.0.1 gets 403. POST bodies must be application/json (415), which a page
// cannot send cross-origin without a preflight that cors_origins decides.
//
// Each request being answered holds one worker thread; a handler whose client is gone (a reset or
// a failed write: serve/connection_probe.h) cancels the request, which frees its sequences at the
// scheduler's next tick.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "serve/scheduler.h"

namespace memra {
class Engine;
}

namespace memra::serve {

class Metrics;

struct ServerOptions {
  std::string model_name;  // the id clients send as "model" (required)
  std::string api_key;     // empty: no authentication
  std::string chat_template;  // Jinja source replacing the model's tokenizer.chat_template (empty: the model's)
  SchedulerOptions scheduler;
  size_t max_body_bytes = size_t(8) << 20;  // larger bodies: 413, however framed
  int32_t http_threads = 0;                 // 0: max_batch + max_queue + 16 (each request holds one)
  // Origins whose pages may call the API ("*": any); empty: no CORS headers, preflights get 403.
  std::vector<std::string> cors_origins;
  // A generation request still running after this long ends (504, or an error event when
  // streaming); 0: no limit.
  std::chrono::milliseconds request_timeout{0};
  // Deadlines for a request's head (from its first byte) and body (from the end of the head), and
  // how long an idle keep-alive connection stays open.
  std::chrono::milliseconds head_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};
  std::chrono::milliseconds idle_timeout{60000};
  // How often a waiting handler checks that its client is still there.
  std::chrono::milliseconds poll_interval{50};
};

class HttpServer {
 public:
  // Loads the tokenizer and the chat template (a template that does not parse disables chat with
  // a warning on stderr). Ignores SIGPIPE process-wide: a client that goes away must not kill
  // the server.
  HttpServer(Engine& engine, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; port 0 picks a free port. Returns the port. Throws memra::Error.
  // A loopback host without an API key turns the Host check on.
  int bind(const std::string& host, int port);
  // Starts the scheduler and serves until stop(); blocks.
  void serve();
  // From any thread but a handler: stops admitting requests (503), lets running streams go on for
  // up to `grace` (then ends them with an error), waits for their responses to be written, and
  // makes serve() return. Idempotent.
  void stop(std::chrono::milliseconds grace);

  Metrics& metrics();
  SchedulerStats stats() const;
  // Open HTTP connections (idle ones included).
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::serve

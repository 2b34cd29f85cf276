// The HTTP front end of `memra serve`: OpenAI-compatible routes over cpp-httplib, talking to the
// scheduler through request streams.
//
//   POST /v1/chat/completions, POST /v1/completions   (JSON, or SSE with "stream": true)
//   GET  /v1/models, GET /health, GET /metrics         (Prometheus text)
//
// With an API key, the /v1/ routes require "Authorization: Bearer <key>" (401 otherwise);
// /health and /metrics stay open for probes and scrapers. Each request holds one HTTP thread
// while it waits; a handler that sees its client gone (ConnectionProbe, or a failed write while
// streaming) cancels the request, which frees its sequences at the scheduler's next tick.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "serve/scheduler.h"

namespace memra {
class Engine;
}

namespace memra::serve {

class Metrics;

struct ServerOptions {
  std::string model_name;  // the id clients send as "model" (required)
  std::string api_key;     // empty: no authentication
  SchedulerOptions scheduler;
  size_t max_body_bytes = size_t(8) << 20;  // larger bodies: 413
  int32_t http_threads = 0;                 // 0: max_batch + max_queue + 16 (each request holds one)
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
  int bind(const std::string& host, int port);
  // Starts the scheduler and serves until stop(); blocks.
  void serve();
  // From any thread but a handler: stops admitting requests (503), lets running streams go on for
  // up to `grace` (then ends them with an error), waits for their responses to be written, and
  // makes serve() return. Idempotent.
  void stop(std::chrono::milliseconds grace);

  Metrics& metrics();
  SchedulerStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace memra::serve

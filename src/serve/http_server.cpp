#include "serve/http_server.h"

#include <fmt/format.h>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "common/error.h"
#include "gguf/gguf.h"
#include "engine/engine.h"
#include "serve/connection_probe.h"
#include "serve/http_lib.h"
#include "serve/metrics.h"
#include "serve/openai_api.h"
#include "serve/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {

namespace {

constexpr const char* kJson = "application/json";

// Metric label for a path: the routes we serve, everything else lumped together (a scanner must
// not grow the label set without bound).
std::string route_label(const std::string& path) {
  for (const char* r : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics"})
    if (path == r) return r;
  return "other";
}

void send_error(httplib::Response& res, int status, const std::string& message, const std::string& param = {},
                const std::string& code = {}) {
  res.status = status;
  res.set_content(error_json(status, message, param, code), kJson);
}

// Compares without an early exit, so response time does not reveal how much of a key matched.
bool same_key(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

// Counts responses still being written, so stop() can let them finish.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>& n) : n_(n) { ++n_; }
  ~InFlight() { --n_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& n_;
};

// One streamed response: owned by the content provider, which httplib calls after the handler
// returns.
struct StreamState {
  StreamState(ApiRequest r, const ModelInfo& model, std::shared_ptr<RequestStream> s, ConnectionProbe p,
              std::atomic<int>& in_flight)
      : request(std::move(r)), builder(request, model), stream(std::move(s)), probe(p), guard(in_flight) {}
  ApiRequest request;
  ResponseBuilder builder;
  std::shared_ptr<RequestStream> stream;
  ConnectionProbe probe;
  InFlight guard;
  bool begun = false;
  std::vector<ChoiceEvent> events;
};

// One call of the chunked content provider: the opening chunks the first time, then whatever
// events arrive within `poll`; false ends the connection (client gone).
bool write_stream(StreamState& st, httplib::DataSink& sink, std::chrono::milliseconds poll) {
  if (!st.begun) {
    st.begun = true;
    const std::string head = st.builder.stream_begin();
    if (!head.empty() && !sink.write(head.data(), head.size())) return false;
  }
  st.events.clear();
  const bool more = st.stream->wait(st.events, poll);
  if (!st.events.empty()) {
    const std::string text = st.builder.stream_events(st.events);
    if (!text.empty() && !sink.write(text.data(), text.size())) return false;
  }
  if (!more) {
    const std::string tail = st.builder.stream_end();
    if (!sink.write(tail.data(), tail.size())) return false;
    sink.done();
    return true;
  }
  return st.events.empty() ? st.probe.alive() : true;
}

// httplib 0.11 listens with a backlog of 5 (compiled into Debian's library): a burst of clients
// overflows the accept queue and sees dropped or reset connections. listen() may be called again
// on a listening socket to change its backlog; the socket is a protected member.
class Listener : public httplib::Server {
 public:
  void widen_backlog(int backlog) {
    if (svr_sock_ != INVALID_SOCKET) ::listen(svr_sock_, backlog);
  }
};

}  // namespace

struct HttpServer::Impl {
  Impl(Engine& e, ServerOptions o) : engine(e), opts(std::move(o)), scheduler(e, opts.scheduler, &metrics) {}

  Engine& engine;
  ServerOptions opts;
  Metrics metrics;
  Scheduler scheduler;
  ModelInfo model;
  Listener svr;
  std::atomic<int> in_flight{0};
  std::atomic<bool> serving{false};
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;

  void setup_routes();
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
};

bool HttpServer::Impl::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (opts.api_key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  if (auth.size() > prefix.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
      same_key(auth.substr(prefix.size()), opts.api_key))
    return true;
  res.status = 401;
  res.set_content(error_json(401,
                             auth.empty() ? "Missing API key: send the header 'Authorization: Bearer <key>'"
                                          : "Incorrect API key provided",
                             {}, "invalid_api_key", "invalid_request_error"),
                  kJson);
  return false;
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  if (!authorized(req, res)) return;
  InFlight guard(in_flight);
  ApiRequest request;
  try {
    request = endpoint == Endpoint::Chat ? parse_chat_request(req.body, model) : parse_completion_request(req.body, model);
  } catch (const ApiError& e) {
    res.status = e.status;
    res.set_content(e.json(), kJson);
    return;
  }
  std::shared_ptr<RequestStream> stream;
  switch (scheduler.submit(request.spec, stream)) {
    case SubmitStatus::Accepted: break;
    case SubmitStatus::QueueFull:
      send_error(res, 429,
                 fmt::format("The server is busy: {} requests are already waiting; retry later",
                             scheduler.options().max_queue),
                 {}, "queue_full");
      return;
    case SubmitStatus::ShuttingDown:
      send_error(res, 503, kShutdownMessage);
      return;
  }
  ConnectionProbe probe(req.local_addr, req.local_port, req.remote_addr, req.remote_port);

  if (request.stream) {
    auto st = std::make_shared<StreamState>(std::move(request), model, stream, probe, in_flight);
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [this, st](size_t, httplib::DataSink& sink) {
          try {
            return write_stream(*st, sink, opts.poll_interval);
          } catch (const std::exception& e) {
            // Nothing sensible can be sent mid-stream; end the connection and free the sequence.
            std::fprintf(stderr, "memra serve: stream aborted: %s\n", e.what());
            st->stream->cancel();
            return false;
          }
        },
        // Runs when the response is done with, written or not: a stream that did not complete
        // (client gone, write failed) is cancelled; after completion cancel() changes nothing.
        [st](bool) { st->stream->cancel(); });
    return;
  }

  ResponseBuilder builder(request, model);
  std::vector<ChoiceEvent> events;
  bool gone = false;
  while (stream->wait(events, opts.poll_interval)) {
    builder.add(events);
    events.clear();
    if (!gone && !probe.alive()) {
      gone = true;
      stream->cancel();
    }
  }
  if (gone) {
    send_error(res, 499, "client closed the request");  // nobody reads it; it counts in /metrics
    return;
  }
  if (builder.error()) {
    const bool shutdown = *builder.error() == kShutdownMessage;
    send_error(res, shutdown ? 503 : 500, *builder.error());
    return;
  }
  res.status = 200;
  res.set_content(dump_json(builder.response()), kJson);
}

void HttpServer::Impl::setup_routes() {
  svr.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::Chat);
  });
  svr.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, Endpoint::Completion);
  });
  svr.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    res.set_content(dump_json(models_list(model)), kJson);
  });
  svr.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    const SchedulerStats s = scheduler.stats();
    ojson j{{"status", s.accepting ? "ok" : "shutting_down"}, {"model", model.name}, {"queued", s.queued},
            {"running", s.running}};
    res.status = s.accepting ? 200 : 503;
    res.set_content(dump_json(j), kJson);
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
  });
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    std::string message;
    switch (res.status) {
      case 404: message = fmt::format("no route for {} {}", req.method, req.path); break;
      case 413: message = "request body too large"; break;
      default: message = fmt::format("HTTP error {}", res.status); break;
    }
    res.set_content(error_json(res.status, message), kJson);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });
  svr.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
    metrics.request_finished(route_label(req.path), res.status);
  });
}

HttpServer::HttpServer(Engine& engine, ServerOptions options) : impl_(std::make_unique<Impl>(engine, std::move(options))) {
  Impl& m = *impl_;
  if (m.opts.model_name.empty()) fail("serve: the model needs a name (--model-name)");
  std::signal(SIGPIPE, SIG_IGN);

  ModelInfo& info = m.model;
  info.name = m.opts.model_name;
  info.tokenizer = &engine.tokenizer();
  info.n_vocab = engine.config().n_vocab;
  info.ctx = engine.ctx();
  info.max_batch = m.opts.scheduler.max_batch;
  info.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (auto tpl = engine.file().get_string_opt("tokenizer.chat_template")) {
    try {
      info.chat_template = std::make_unique<chat::ChatTemplate>(*tpl);
      info.xml_tool_calls = tpl->find("<function=") != std::string::npos;
    } catch (const Error& e) {
      std::fprintf(stderr, "memra serve: warning: the model's chat template cannot be used (%s); "
                           "/v1/chat/completions is disabled\n", e.what());
    }
  }
  const Tokenizer& tok = *info.tokenizer;
  if (tok.bos_id() >= 0) info.template_options.bos_token = tok.token_bytes(tok.bos_id());
  if (tok.eos_id() >= 0) info.template_options.eos_token = tok.token_bytes(tok.eos_id());

  // Each waiting or running request holds a thread; beyond the cap, connections wait in the
  // pool's queue instead of getting a 429.
  const int32_t threads = m.opts.http_threads > 0
                              ? m.opts.http_threads
                              : std::min(m.opts.scheduler.max_batch + m.opts.scheduler.max_queue + 16, 1024);
  m.svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  m.svr.set_payload_max_length(m.opts.max_body_bytes);
  m.svr.set_tcp_nodelay(true);  // token-sized SSE writes must not wait for Nagle
  m.setup_routes();
}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

int HttpServer::bind(const std::string& host, int port) {
  Impl& m = *impl_;
  const int bound = port == 0 ? m.svr.bind_to_any_port(host) : (m.svr.bind_to_port(host, port) ? port : -1);
  if (bound <= 0) fail("serve: cannot listen on {}:{} (address in use, or not an address of this machine)", host, port);
  m.svr.widen_backlog(1024);
  return bound;
}

void HttpServer::serve() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.stop_mu);
    if (m.stopping) return;
    m.serving = true;
  }
  m.scheduler.start();
  m.svr.listen_after_bind();
  m.serving = false;
}

void HttpServer::stop(std::chrono::milliseconds grace) {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.stop_mu);
    if (m.stopping.exchange(true)) {
      m.scheduler.shutdown(grace);  // a second, shorter grace still applies
      return;
    }
  }
  m.scheduler.shutdown(grace);
  // Every request has its final events now; give the handlers a moment to write them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (m.in_flight.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  while (m.serving && !m.svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  m.svr.stop();
}

Metrics& HttpServer::metrics() { return impl_->metrics; }

SchedulerStats HttpServer::stats() const { return impl_->scheduler.stats(); }

}  // namespace memra::serve

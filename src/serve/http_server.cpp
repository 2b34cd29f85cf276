#include "serve/http_server.h"

#include <fmt/format.h>

#include <malloc.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/error.h"
#include "gguf/gguf.h"
#include "engine/engine.h"
#include "serve/chat_prompt.h"
#include "serve/connection_probe.h"
#include "serve/http_front.h"
#include "serve/http_lib.h"
#include "serve/metrics.h"
#include "serve/openai_api.h"
#include "serve/openai_response.h"
#include "serve/tokenize_api.h"
#include "tokenizer/tokenizer.h"

namespace memra::serve {

namespace {

constexpr const char* kJson = "application/json";

// Metric label for a path: the routes we serve, everything else lumped together (a scanner must
// not grow the label set without bound).
std::string route_label(const std::string& path) {
  for (const char* r : {"/v1/chat/completions", "/v1/completions", "/v1/models", "/health", "/metrics", "/tokenize",
                        "/detokenize"})
    if (path == r) return r;
  if (path.rfind("/v1/models/", 0) == 0) return "/v1/models/{id}";
  return "other";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The request being answered on this worker thread (handlers get only httplib's Request, which
// does not carry the socket).
thread_local const FrontRequest* t_request = nullptr;

// A request as cpp-httplib reads it: the canonical bytes the front assembled. Answers go straight
// to the socket.
class FrontStream : public httplib::Stream {
 public:
  FrontStream(const FrontRequest& r, std::chrono::milliseconds write_timeout) : r_(r), timeout_(write_timeout) {}
  bool is_readable() const override { return pos_ < r_.wire.size(); }
  // Polled before every chunk of a streamed answer: a reset connection ends the stream.
  bool is_writable() const override {
    pollfd p{r_.fd, POLLOUT, 0};
    return ::poll(&p, 1, static_cast<int>(timeout_.count())) > 0 && !(p.revents & (POLLERR | POLLHUP | POLLNVAL));
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, r_.wire.size() - pos_);
    std::memcpy(ptr, r_.wire.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    return write_all(r_.fd, ptr, size, timeout_) ? static_cast<ssize_t>(size) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = r_.remote_addr;
    port = r_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = r_.local_addr;
    port = r_.local_port;
  }
  socket_t socket() const override { return r_.fd; }

 private:
  const FrontRequest& r_;
  std::chrono::milliseconds timeout_;
  size_t pos_ = 0;
};

// cpp-httplib's router and response writer, driven by the front instead of its own listener.
class Router : public httplib::Server {
 public:
  bool answer(httplib::Stream& s, bool close_connection, bool& connection_closed) {
    return process_request(s, close_connection, connection_closed, nullptr);
  }
  // Streamed answers run while this holds a socket (httplib's "not shutting down" test).
  void set_serving(int fd) { svr_sock_ = fd; }
};

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// A Host header naming the loopback: localhost, 127.0.0.1 or [::1], with any port.
bool loopback_host_header(const std::string& value) {
  std::string h = lower(value);
  if (h.rfind("[::1]", 0) == 0) h = h.substr(5);
  else if (h.rfind("localhost", 0) == 0) h = h.substr(9);
  else if (h.rfind("127.0.0.1", 0) == 0) h = h.substr(9);
  else return false;
  if (h.empty()) return true;
  return h[0] == ':' && h.size() > 1 && h.size() <= 6 &&
         std::all_of(h.begin() + 1, h.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "application/json", optionally with parameters ("; charset=utf-8").
bool is_json_type(const std::string& content_type) {
  std::string t = lower(content_type.substr(0, content_type.find(';')));
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.pop_back();
  return t == "application/json";
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
  bool pinged = false;  // the probe write after the client's end-of-file is done
  std::vector<ChoiceEvent> events;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  std::string timeout_message;
};

// A request past its deadline: cancelled, and its choices end with an error instead of "stop".
void expire(RequestStream& stream, std::vector<ChoiceEvent>& events, const std::string& message) {
  stream.cancel();
  for (auto& ev : events)
    if (ev.finish == FinishReason::Cancelled) {
      ev.finish = FinishReason::Error;
      ev.error = message;
    }
}

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
  if (std::chrono::steady_clock::now() >= st.deadline) expire(*st.stream, st.events, st.timeout_message);
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
  if (!st.events.empty()) return true;
  if (!st.probe.alive()) return false;
  if (st.probe.peer_done() && !st.pinged) {
    // End-of-file from the client: half-closed or gone. A comment line (ignored by SSE readers)
    // makes a closed socket answer with a reset, which the next check sees.
    st.pinged = true;
    static constexpr char kPing[] = ": ping\n\n";
    return sink.write(kPing, sizeof kPing - 1);
  }
  return true;
}

}  // namespace

struct HttpServer::Impl {
  Impl(Engine& e, ServerOptions o)
      : engine(e),
        opts(std::move(o)),
        scheduler(e, opts.scheduler, &metrics),
        front(front_options(opts), [this](const FrontRequest& r) { return answer(r); },
              [this](int status, const std::string& message) {
                metrics.request_finished("other", status);
                return error_json(status, message);
              }) {}

  static FrontOptions front_options(const ServerOptions& o) {
    FrontOptions f;
    f.max_body_bytes = o.max_body_bytes;
    f.head_timeout = o.head_timeout;
    f.body_timeout = o.body_timeout;
    f.idle_timeout = o.idle_timeout;
    // Each waiting or running request holds a worker; /health and the rest get 16 more.
    f.workers = o.http_threads > 0 ? o.http_threads
                                   : std::min(o.scheduler.max_batch + o.scheduler.max_queue + 16, 1024);
    return f;
  }

  Engine& engine;
  ServerOptions opts;
  Metrics metrics;
  Scheduler scheduler;
  ModelInfo model;
  Router svr;
  HttpFront front;
  bool check_host = false;  // bound to loopback without a key
  std::atomic<int> in_flight{0};
  std::atomic<bool> stopping{false};
  std::mutex stop_mu;

  bool answer(const FrontRequest& r);
  void setup_routes();
  bool pre_route(const httplib::Request& req, httplib::Response& res) const;
  bool authorized(const httplib::Request& req, httplib::Response& res) const;
  bool json_body(const httplib::Request& req, httplib::Response& res) const;
  void generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint);
};

bool HttpServer::Impl::answer(const FrontRequest& r) {
  t_request = &r;
  FrontStream stream(r, std::chrono::milliseconds(30000));
  bool closed = false;
  const bool ok = svr.answer(stream, r.peer_done || stopping, closed);
  t_request = nullptr;
  // A large body leaves freed pages in this thread's malloc arena; give them back now rather
  // than let every worker's arena keep its high-water mark.
  if (r.body_bytes >= (size_t(1) << 20)) malloc_trim(0);
  return ok && !closed;
}

// Host and CORS, before any route (and before the body is parsed). True: answered here.
bool HttpServer::Impl::pre_route(const httplib::Request& req, httplib::Response& res) const {
  if (check_host) {
    const std::string host = req.get_header_value("Host");
    if (!loopback_host_header(host) && !(host.empty() && t_request && !t_request->http11)) {
      send_error(res, 403,
                 fmt::format("Host '{}' is not served: this server listens on the loopback without an API key and "
                             "answers only requests for localhost, 127.0.0.1 or [::1] (start it with --api-key to "
                             "serve other names)",
                             host));
      return true;
    }
  }
  const std::string origin = req.get_header_value("Origin");
  bool allowed = false;
  if (!origin.empty())
    for (const auto& o : opts.cors_origins) allowed = allowed || o == "*" || o == origin;
  if (allowed) {
    res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (req.method == "OPTIONS") {
    if (!allowed) {
      send_error(res, 403, origin.empty() ? "OPTIONS is only answered as a CORS preflight (with an Origin header)"
                                          : fmt::format("origin '{}' is not allowed (see --cors-origins)", origin));
      return true;
    }
    res.status = 204;
    res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
    res.set_header("Access-Control-Max-Age", "600");
    return true;
  }
  return false;
}

bool HttpServer::Impl::json_body(const httplib::Request& req, httplib::Response& res) const {
  if (is_json_type(req.get_header_value("Content-Type"))) return true;
  send_error(res, 415,
             fmt::format("Content-Type must be application/json, got '{}'", req.get_header_value("Content-Type")));
  return false;
}

bool HttpServer::Impl::authorized(const httplib::Request& req, httplib::Response& res) const {
  if (opts.api_key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  // The scheme is case-insensitive (RFC 9110 section 11.1): "bearer" and "BEARER" are Bearer too.
  const std::string prefix = "bearer ";
  if (auth.size() > prefix.size() && lower(auth.substr(0, prefix.size())) == prefix) {
    size_t at = prefix.size();
    while (at < auth.size() && auth[at] == ' ') ++at;
    if (same_key(auth.substr(at), opts.api_key)) return true;
  }
  res.status = 401;
  res.set_content(error_json(401,
                             auth.empty() ? "Missing API key: send the header 'Authorization: Bearer <key>'"
                                          : "Incorrect API key provided",
                             {}, "invalid_api_key", "invalid_request_error"),
                  kJson);
  return false;
}

void HttpServer::Impl::generate(const httplib::Request& req, httplib::Response& res, Endpoint endpoint) {
  if (!authorized(req, res) || !json_body(req, res)) return;
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
  ConnectionProbe probe(t_request ? t_request->fd : -1);
  const bool http11 = t_request && t_request->http11;
  const auto deadline = opts.request_timeout.count() > 0 ? std::chrono::steady_clock::now() + opts.request_timeout
                                                         : std::chrono::steady_clock::time_point::max();
  const std::string timeout_message =
      fmt::format("the request took longer than the server's limit of {} s", opts.request_timeout.count() / 1000.0);

  if (request.stream) {
    auto st = std::make_shared<StreamState>(std::move(request), model, stream, probe, in_flight);
    st->deadline = deadline;
    st->timeout_message = timeout_message;
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
  bool gone = false, pinged = false, timed_out = false;
  for (bool more = true; more;) {
    more = stream->wait(events, opts.poll_interval);
    if (!timed_out && std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      stream->cancel();
    }
    builder.add(events);
    events.clear();
    if (gone) continue;
    if (!probe.alive()) {
      gone = true;
      stream->cancel();
    } else if (http11 && !pinged && probe.peer_done()) {
      // End-of-file from the client: half-closed (it still reads) or gone. An interim 100
      // (which HTTP/1.1 clients must read past) makes a closed socket answer with a reset.
      pinged = true;
      static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
      if (!write_all(probe.fd(), kContinue, sizeof kContinue - 1, std::chrono::milliseconds(1000))) {
        gone = true;
        stream->cancel();
      }
    }
  }
  if (gone) {
    send_error(res, 499, "client closed the request");  // nobody reads it; it counts in /metrics
    return;
  }
  if (timed_out) {
    send_error(res, 504, timeout_message, {}, "timeout");
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
  svr.Get(R"(/v1/models/(.+))", [this](const httplib::Request& req, httplib::Response& res) {
    if (!authorized(req, res)) return;
    const std::string id = req.matches[1];
    if (id != model.name) {
      send_error(res, 404, fmt::format("The model '{}' does not exist; this server serves '{}'", id, model.name),
                 "model", "model_not_found");
      return;
    }
    res.set_content(dump_json(models_list(model)["data"][0]), kJson);
  });
  auto tokens_route = [this](const char* path, ojson (*fn)(std::string_view, const ModelInfo&)) {
    svr.Post(path, [this, fn](const httplib::Request& req, httplib::Response& res) {
      if (!authorized(req, res) || !json_body(req, res)) return;
      try {
        res.set_content(dump_json(fn(req.body, model)), kJson);
      } catch (const ApiError& e) {
        res.status = e.status;
        res.set_content(e.json(), kJson);
      }
    });
  };
  tokens_route("/tokenize", &tokenize_request);
  tokens_route("/detokenize", &detokenize_request);
  svr.Options(R"(.*)", [](const httplib::Request&, httplib::Response&) {});  // answered by pre_route
  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    return pre_route(req, res) ? httplib::Server::HandlerResponse::Handled : httplib::Server::HandlerResponse::Unhandled;
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
  if (!m.opts.chat_template.empty()) {
    // Asked for by name: a template that does not parse is an error, not a warning.
    try {
      info.chat_template = std::make_unique<chat::ChatTemplate>(m.opts.chat_template);
    } catch (const Error& e) {
      fail("serve: the chat template given (--chat-template) cannot be used: {}", e.what());
    }
    info.xml_tool_calls = m.opts.chat_template.find("<function=") != std::string::npos;
  } else if (auto tpl = engine.file().get_string_opt("tokenizer.chat_template")) {
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
  index_vocab(info);

  m.svr.set_payload_max_length(m.opts.max_body_bytes);  // the front enforces it first
  m.svr.set_keep_alive_timeout(std::max<time_t>(1, m.opts.idle_timeout.count() / 1000));
  m.svr.set_keep_alive_max_count(size_t(1) << 30);  // the front decides when a connection ends
  m.setup_routes();
}

HttpServer::~HttpServer() { stop(std::chrono::milliseconds(0)); }

int HttpServer::bind(const std::string& host, int port) {
  Impl& m = *impl_;
  const int bound = m.front.listen(host, port);
  m.check_host = m.opts.api_key.empty() && is_loopback_host(host);
  return bound;
}

void HttpServer::serve() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> lk(m.stop_mu);
    if (m.stopping) return;
    m.svr.set_serving(m.front.listen_fd());
  }
  m.scheduler.start();
  m.front.run();
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
  {
    std::lock_guard<std::mutex> lk(m.stop_mu);
    m.svr.set_serving(-1);
  }
  m.front.stop();
}

Metrics& HttpServer::metrics() { return impl_->metrics; }

SchedulerStats HttpServer::stats() const { return impl_->scheduler.stats(); }

size_t HttpServer::connections() const { return impl_->front.connections(); }

}  // namespace memra::serve

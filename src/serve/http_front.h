// The connection layer of `memra serve`: one event-loop thread (epoll) owns the listening socket
// and every connection while it is idle or sending a request; worker threads only ever see
// complete, validated requests.
//
// Why not cpp-httplib's own listener: it gives each connection a pool thread for the whole of its
// life, so slow or idle clients (slowloris, keep-alive sockets) take every thread and /health
// waits behind them, and Debian's 0.11.4 reads chunked, unframed and compressed bodies without a
// bound. Here an idle or slow connection costs a few hundred bytes and a descriptor, and a request
// reaches a worker only after its head and body passed these rules:
//
//   - request line and headers: 32 KiB and 100 fields at most (431), target 8 KiB (414),
//     HTTP/1.0 or 1.1 only (505), no obsolete line folding or space before a colon (400)
//   - framing: Content-Length (one, digits only) or Transfer-Encoding: chunked, never both (400);
//     other transfer codings 501; a POST without either 411; the decoded body bounded by
//     max_body_bytes while it arrives (413 before reading a declared oversize body)
//   - Content-Encoding other than identity: 415 (compressed bodies are never inflated)
//   - Expect: 100-continue answered after these checks; other expectations 417
//   - deadlines: the head within head_timeout of its first byte, the body within body_timeout of
//     the head (408); an idle keep-alive connection is closed after idle_timeout
//
// A request is handed over re-serialised in a canonical form: its request line and headers,
// without the framing, coding, Range and Expect headers, then Content-Length and the decoded body.
// The worker answers on the socket itself (streams included) and gives the connection back for the
// next request, or closes it. A peer that half-closes (shutdown(SHUT_WR)) after a complete request
// still gets its answer; the connection closes after it.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace memra::serve {

struct FrontOptions {
  size_t max_body_bytes = size_t(8) << 20;
  size_t max_head_bytes = 32 << 10;
  size_t max_headers = 100;
  size_t max_target_bytes = 8 << 10;
  std::chrono::milliseconds head_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};
  std::chrono::milliseconds idle_timeout{60000};
  // A response write that makes no progress for this long drops the connection.
  std::chrono::milliseconds write_timeout{30000};
  // Open connections at most (beyond: new ones are closed at once); also capped by the
  // process's descriptor limit, which the front raises to its hard limit.
  size_t max_connections = 8192;
  int workers = 16;
};

// A complete request as a worker sees it.
struct FrontRequest {
  int fd = -1;
  std::string wire;        // canonical request line, headers, Content-Length, decoded body
  size_t body_bytes = 0;
  bool http11 = true;      // HTTP/1.1 (interim 1xx responses allowed) rather than 1.0
  bool peer_done = false;  // the peer closed its sending side after this request
  std::string local_addr, remote_addr;
  int local_port = 0, remote_port = 0;
};

class HttpFront {
 public:
  // Answers a request on req.fd; returns true when the connection may carry another request.
  using Dispatch = std::function<bool(const FrontRequest& req)>;
  // The body (JSON) of an error answered by the front itself, and a note of it for metrics.
  using ErrorBody = std::function<std::string(int status, const std::string& message)>;

  HttpFront(FrontOptions options, Dispatch dispatch, ErrorBody error_body);
  ~HttpFront();
  HttpFront(const HttpFront&) = delete;
  HttpFront& operator=(const HttpFront&) = delete;

  // Binds and listens (backlog 1024); port 0 picks a free port. Returns the port; throws
  // memra::Error.
  int listen(const std::string& host, int port);
  int listen_fd() const;
  // Runs the event loop and the workers until stop(); blocks. Queued requests are still answered.
  void run();
  // From any thread, idempotent: makes run() return once the workers are done.
  void stop();

  // Open connections (idle, reading or answered), for tests and /metrics.
  size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes all of `data` to a non-blocking socket, waiting up to `timeout` whenever no progress is
// possible. False on error, reset or timeout.
bool write_all(int fd, const char* data, size_t size, std::chrono::milliseconds timeout);

}  // namespace memra::serve

#include "serve/http_front.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/error.h"

namespace memra::serve {

namespace {

using Clock = std::chrono::steady_clock;

// How often deadlines are checked: the resolution of every timeout below.
constexpr auto kSweep = std::chrono::milliseconds(100);
// After an error answer, the rest of the request is read and dropped for this long (so the peer
// sees the answer instead of a reset caused by its unread bytes), and at most this much.
constexpr auto kDrainTime = std::chrono::seconds(2);
constexpr size_t kDrainBytes = size_t(64) << 20;
constexpr size_t kReadChunk = 64 << 10;
constexpr size_t kMaxChunkLine = 1024;  // chunk size and extensions

enum class Phase { Head, Body, Chunked, Dispatched, Draining };
enum class ChunkStep { Size, Data, DataEnd, Trailer };

struct Conn {
  int fd = -1;
  Phase phase = Phase::Head;
  std::string in;   // received bytes; those before `pos` are consumed
  size_t pos = 0;
  size_t scan = 0;  // Head: the end of the head is searched from here on
  Clock::time_point deadline;
  bool started = false;  // Head: bytes of a request have arrived (else the connection is idle)
  bool eof = false;
  // The request being read.
  std::string head;  // canonical request line and headers
  bool http11 = true;
  std::string body;
  size_t content_left = 0;
  ChunkStep chunk = ChunkStep::Size;
  size_t chunk_left = 0;
  size_t trailer_bytes = 0;
  size_t drained = 0;
  std::string local_addr, remote_addr;
  int local_port = 0, remote_port = 0;
};

struct Reject {
  int status = 0;
  std::string message;
};

const char* reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Error";
  }
}

bool is_tchar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         std::strchr("!#$%&'*+-.^_`|~", c) != nullptr;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Headers the canonical form leaves out: framing and codings (replaced by one Content-Length),
// Range (API answers are never partial), Expect (answered here), hop-by-hop upgrades, and the
// names cpp-httplib uses for the addresses it records (a client must not be able to pose as them).
bool dropped_header(const std::string& name) {
  for (const char* d : {"content-length", "transfer-encoding", "content-encoding", "range", "if-range", "expect", "te",
                        "trailer", "upgrade", "remote_addr", "remote_port", "local_addr", "local_port"})
    if (name == d) return true;
  return false;
}

// What the head says about the body that follows.
struct Framing {
  bool chunked = false;
  size_t length = 0;
  bool expect_continue = false;
};

// Parses and checks a request head (without its final blank line) into `c.head`; a status != 0
// refuses it.
Reject parse_head(std::string_view text, const FrontOptions& o, Conn& c, Framing& f) {
  auto bad = [](int status, std::string m) { return Reject{status, std::move(m)}; };
  size_t eol = text.find("\r\n");
  const std::string_view line = text.substr(0, eol);
  std::string_view rest = eol == std::string_view::npos ? std::string_view{} : text.substr(eol + 2);

  // Request line: method SP target SP version.
  const size_t s1 = line.find(' ');
  const size_t s2 = s1 == std::string_view::npos ? s1 : line.find(' ', s1 + 1);
  if (s1 == 0 || s1 == std::string_view::npos || s2 == std::string_view::npos || line.find(' ', s2 + 1) != std::string_view::npos)
    return bad(400, "malformed request line");
  const std::string_view method = line.substr(0, s1), target = line.substr(s1 + 1, s2 - s1 - 1),
                         version = line.substr(s2 + 1);
  if (!std::all_of(method.begin(), method.end(), is_tchar)) return bad(400, "malformed request method");
  if (target.size() > o.max_target_bytes) return bad(414, fmt::format("request target longer than {} bytes", o.max_target_bytes));
  if (target.empty() || std::any_of(target.begin(), target.end(), [](char ch) {
        return static_cast<unsigned char>(ch) <= 0x20 || ch == 0x7f;
      }))
    return bad(400, "malformed request target");
  if (version == "HTTP/1.1") c.http11 = true;
  else if (version == "HTTP/1.0") c.http11 = false;
  else if (version.size() == 8 && version.substr(0, 5) == "HTTP/") return bad(505, "only HTTP/1.0 and HTTP/1.1 are served");
  else return bad(400, "malformed HTTP version");

  c.head.clear();
  c.head.append(line).append("\r\n");
  size_t n_headers = 0, n_length = 0;
  std::string te;
  bool has_te = false;
  while (!rest.empty()) {
    eol = rest.find("\r\n");
    const std::string_view h = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view{} : rest.substr(eol + 2);
    if (++n_headers > o.max_headers) return bad(431, fmt::format("more than {} header fields", o.max_headers));
    if (h.empty() || h[0] == ' ' || h[0] == '\t') return bad(400, "obsolete line folding in a header");
    const size_t colon = h.find(':');
    if (colon == std::string_view::npos || colon == 0) return bad(400, "malformed header field");
    const std::string_view name_raw = h.substr(0, colon);
    if (!std::all_of(name_raw.begin(), name_raw.end(), is_tchar))
      return bad(400, "malformed header field name (no space may precede the colon)");
    const std::string_view value = trim(h.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), [](char ch) { return ch == '\0' || ch == '\r' || ch == '\n'; }))
      return bad(400, "malformed header field value");
    const std::string name = lower(name_raw);
    if (name == "content-length") {
      ++n_length;
      if (value.empty() || value.size() > 15 || !std::all_of(value.begin(), value.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
        return bad(400, "malformed Content-Length");
      f.length = std::stoull(std::string(value));
    } else if (name == "transfer-encoding") {
      has_te = true;
      if (!te.empty()) te += ",";
      te += lower(value);
    } else if (name == "content-encoding") {
      if (lower(value) != "identity")
        return bad(415, fmt::format("Content-Encoding '{}' is not accepted: send the body uncompressed", value));
    } else if (name == "expect") {
      if (lower(value) != "100-continue") return bad(417, fmt::format("unsupported expectation '{}'", value));
      f.expect_continue = c.http11;
    }
    if (!dropped_header(name)) c.head.append(h).append("\r\n");
  }
  if (n_length > 1) return bad(400, "more than one Content-Length");
  if (has_te) {
    // Both framings at once is how requests are smuggled past proxies: refuse, never pick one.
    if (n_length > 0) return bad(400, "both Content-Length and Transfer-Encoding");
    if (!c.http11) return bad(400, "Transfer-Encoding in an HTTP/1.0 request");
    std::string t;
    for (char ch : te)
      if (ch != ' ' && ch != '\t') t += ch;
    if (t != "chunked") return bad(501, fmt::format("unsupported Transfer-Encoding '{}' (only chunked)", te));
    f.chunked = true;
  } else if (n_length == 0 && (method == "POST" || method == "PUT" || method == "PATCH")) {
    return bad(411, "a request body needs a Content-Length or chunked Transfer-Encoding");
  }
  if (!f.chunked && f.length > o.max_body_bytes)
    return bad(413, fmt::format("request body larger than {} bytes", o.max_body_bytes));
  return {};
}

// Parses a chunk-size line: hex digits, then optional extensions (ignored).
bool parse_chunk_size(std::string_view line, size_t& size) {
  size_t i = 0;
  size = 0;
  for (; i < line.size() && std::isxdigit(static_cast<unsigned char>(line[i])); ++i) {
    if (i >= 15) return false;
    const char ch = line[i];
    size = size * 16 + static_cast<size_t>(ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10);
  }
  if (i == 0) return false;
  const std::string_view tail = trim(line.substr(i));
  return tail.empty() || tail[0] == ';';
}

void describe(const sockaddr_storage& a, std::string& addr, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf);
    port = ntohs(s->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf);
    port = ntohs(s->sin6_port);
  }
  addr = buf;
}

}  // namespace

bool write_all(int fd, const char* data, size_t size, std::chrono::milliseconds timeout) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data += n;
      size -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd p{fd, POLLOUT, 0};
    const int r = ::poll(&p, 1, static_cast<int>(timeout.count()));
    if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
  }
  return true;
}

struct HttpFront::Impl {
  FrontOptions o;
  Dispatch dispatch;
  ErrorBody error_body;
  int listen_fd = -1;
  int epoll_fd = -1;
  int wake_fd = -1;
  int spare_fd = -1;  // closed to accept (and drop) a connection when descriptors run out
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  std::atomic<size_t> n_conns{0};
  std::atomic<bool> stopping{false};

  // Workers: complete requests in, connections back out.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::pair<Conn*, std::unique_ptr<FrontRequest>>> queue;
  bool workers_quit = false;
  std::vector<std::pair<Conn*, bool>> returned;  // (connection, may carry another request)
  std::vector<std::thread> workers;

  void worker();
  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(wake_fd, &one, sizeof one);
  }
  void accept_all();
  void on_readable(Conn& c);
  void progress(Conn& c);
  void reject(Conn& c, int status, const std::string& message);
  void hand_over(Conn& c);
  void take_back(Conn* c, bool keep);
  void close_conn(Conn& c);
  void sweep();
};

void HttpFront::Impl::worker() {
  for (;;) {
    std::pair<Conn*, std::unique_ptr<FrontRequest>> job;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return workers_quit || !queue.empty(); });
      if (queue.empty()) return;
      job = std::move(queue.front());
      queue.pop_front();
    }
    bool keep = false;
    try {
      keep = dispatch(*job.second);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "memra serve: request failed: %s\n", e.what());
    }
    keep = keep && !job.second->peer_done;
    job.second.reset();  // the body can be large: free it before the connection idles
    {
      std::lock_guard<std::mutex> lk(mu);
      returned.emplace_back(job.first, keep);
    }
    wake();
  }
}

void HttpFront::Impl::close_conn(Conn& c) {
  const int fd = c.fd;
  if (c.phase != Phase::Dispatched) ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
  ::close(fd);
  conns.erase(fd);
  n_conns = conns.size();
}

void HttpFront::Impl::accept_all() {
  for (;;) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd >= 0) {
        // Out of descriptors: the pending connection would make the listening socket readable
        // forever. Free the spare, take the connection and drop it, keep the spare again.
        ::close(spare_fd);
        const int dropped = ::accept(listen_fd, nullptr, nullptr);
        if (dropped >= 0) ::close(dropped);
        spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return;  // EAGAIN, or an error the next readiness retries
    }
    if (conns.size() >= o.max_connections) {
      ::close(fd);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // token-sized SSE writes must not wait
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->deadline = Clock::now() + o.head_timeout;
    sockaddr_storage local{};
    socklen_t ll = sizeof local;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &ll) == 0) describe(local, c->local_addr, c->local_port);
    describe(peer, c->remote_addr, c->remote_port);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    conns.emplace(fd, std::move(c));
    n_conns = conns.size();
  }
}

void HttpFront::Impl::reject(Conn& c, int status, const std::string& message) {
  const std::string body = error_body(status, message);
  const std::string resp = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}", status,
      reason(status), body.size(), body);
  // One attempt: the connection is fresh from the answer's point of view, so a socket buffer
  // holds it; a peer that does not read loses it.
  [[maybe_unused]] ssize_t n = ::send(c.fd, resp.data(), resp.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Phase::Draining;
  c.deadline = Clock::now() + kDrainTime;
  c.in.clear();
  c.in.shrink_to_fit();
  c.pos = 0;
  c.body.clear();
  c.body.shrink_to_fit();
}

void HttpFront::Impl::hand_over(Conn& c) {
  auto r = std::make_unique<FrontRequest>();
  r->fd = c.fd;
  r->body_bytes = c.body.size();
  r->wire.reserve(c.head.size() + 32 + c.body.size());
  r->wire.append(c.head).append(fmt::format("Content-Length: {}\r\n\r\n", c.body.size())).append(c.body);
  r->http11 = c.http11;
  r->peer_done = c.eof;
  r->local_addr = c.local_addr;
  r->remote_addr = c.remote_addr;
  r->local_port = c.local_port;
  r->remote_port = c.remote_port;
  c.body.clear();
  c.body.shrink_to_fit();
  c.head.clear();
  // Pipelined bytes stay in `in` for the next request; the loop stops watching the socket while
  // a worker answers on it.
  ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c.fd, nullptr);
  c.phase = Phase::Dispatched;
  {
    std::lock_guard<std::mutex> lk(mu);
    queue.emplace_back(&c, std::move(r));
  }
  cv.notify_one();
}

void HttpFront::Impl::progress(Conn& c) {
  for (;;) {
    const std::string_view avail = std::string_view(c.in).substr(c.pos);
    switch (c.phase) {
      case Phase::Head: {
        // An empty line before a request line is tolerated (RFC 9112 section 2.2).
        if (!c.started) {
          while (c.in.size() - c.pos >= 2 && c.in.compare(c.pos, 2, "\r\n") == 0) c.pos += 2;
          if (c.pos == c.in.size()) return;
          c.started = true;
          c.deadline = Clock::now() + o.head_timeout;
          c.scan = c.pos;
        }
        const size_t from = std::max(c.scan, c.pos + 3) - 3;
        const size_t end = c.in.find("\r\n\r\n", from);
        if (end == std::string::npos) {
          if (c.in.size() - c.pos > o.max_head_bytes)
            return reject(c, 431, fmt::format("request line and headers longer than {} bytes", o.max_head_bytes));
          c.scan = c.in.size();
          return;
        }
        if (end + 4 - c.pos > o.max_head_bytes)
          return reject(c, 431, fmt::format("request line and headers longer than {} bytes", o.max_head_bytes));
        Framing f;
        const Reject r = parse_head(std::string_view(c.in).substr(c.pos, end - c.pos), o, c, f);
        if (r.status != 0) return reject(c, r.status, r.message);
        c.pos = end + 4;
        c.body.clear();
        c.deadline = Clock::now() + o.body_timeout;
        if (f.chunked) {
          c.phase = Phase::Chunked;
          c.chunk = ChunkStep::Size;
          c.trailer_bytes = 0;
        } else {
          c.phase = Phase::Body;
          c.content_left = f.length;
          c.body.reserve(std::min<size_t>(f.length, size_t(1) << 20));  // grows as bytes arrive, not as declared
        }
        // Interim answer only once the head passed: a refused body is never sent.
        if (f.expect_continue && (f.chunked || f.length > 0)) {
          static constexpr char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] ssize_t n = ::send(c.fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        break;
      }
      case Phase::Body: {
        const size_t take = std::min(avail.size(), c.content_left);
        c.body.append(avail.substr(0, take));
        c.pos += take;
        c.content_left -= take;
        if (c.content_left > 0) return;
        return hand_over(c);
      }
      case Phase::Chunked: {
        if (c.chunk == ChunkStep::Size || c.chunk == ChunkStep::Trailer) {
          const size_t eol = avail.find("\r\n");
          const size_t trailer_room = c.trailer_bytes < o.max_head_bytes ? o.max_head_bytes - c.trailer_bytes : 0;
          const size_t limit = c.chunk == ChunkStep::Size ? kMaxChunkLine : trailer_room;
          if (eol == std::string_view::npos) {
            if (avail.size() > limit) return reject(c, c.chunk == ChunkStep::Size ? 400 : 431, "chunk header or trailer too long");
            return;
          }
          if (eol > limit) return reject(c, c.chunk == ChunkStep::Size ? 400 : 431, "chunk header or trailer too long");
          const std::string_view line = avail.substr(0, eol);
          c.pos += eol + 2;
          if (c.chunk == ChunkStep::Trailer) {
            c.trailer_bytes += eol + 2;
            if (line.empty()) return hand_over(c);  // trailers are read and dropped
            continue;
          }
          size_t size = 0;
          if (!parse_chunk_size(line, size)) return reject(c, 400, "malformed chunk size");
          if (size == 0) {
            c.chunk = ChunkStep::Trailer;
            continue;
          }
          if (size > o.max_body_bytes - c.body.size())
            return reject(c, 413, fmt::format("request body larger than {} bytes", o.max_body_bytes));
          c.chunk_left = size;
          c.chunk = ChunkStep::Data;
          continue;
        }
        if (c.chunk == ChunkStep::Data) {
          const size_t take = std::min(avail.size(), c.chunk_left);
          c.body.append(avail.substr(0, take));
          c.pos += take;
          c.chunk_left -= take;
          if (c.chunk_left > 0) return;
          c.chunk = ChunkStep::DataEnd;
          continue;
        }
        if (avail.size() < 2) return;
        if (avail.substr(0, 2) != "\r\n") return reject(c, 400, "chunk data not followed by CRLF");
        c.pos += 2;
        c.chunk = ChunkStep::Size;
        continue;
      }
      case Phase::Dispatched:
      case Phase::Draining: return;
    }
  }
}

void HttpFront::Impl::on_readable(Conn& c) {
  char buf[kReadChunk];
  for (;;) {
    const ssize_t n = ::recv(c.fd, buf, sizeof buf, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      return close_conn(c);
    }
    if (n == 0) {
      c.eof = true;
      break;
    }
    if (c.phase == Phase::Draining) {
      c.drained += static_cast<size_t>(n);
      if (c.drained > kDrainBytes) return close_conn(c);
      continue;
    }
    c.in.append(buf, static_cast<size_t>(n));
    progress(c);
    // Consumed bytes are dropped once per read, not per step (tiny chunks stay linear).
    if (c.pos > 0 && c.phase != Phase::Draining) {
      c.in.erase(0, c.pos);
      c.scan -= std::min(c.scan, c.pos);
      c.pos = 0;
    }
    if (c.phase == Phase::Dispatched) return;
  }
  if (c.eof) {
    // The peer sent all it will: a complete request is answered (half-close), anything else ends.
    if (c.phase != Phase::Dispatched) close_conn(c);
  }
}

void HttpFront::Impl::take_back(Conn* c, bool keep) {
  if (!keep || stopping) return close_conn(*c);
  c->phase = Phase::Head;
  c->started = false;
  c->scan = 0;
  c->deadline = Clock::now() + o.idle_timeout;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c->fd;
  if (::epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
    ::close(c->fd);
    conns.erase(c->fd);
    n_conns = conns.size();
    return;
  }
  progress(*c);  // a pipelined request may be here already
  if (c->phase != Phase::Dispatched && c->phase != Phase::Draining && c->pos > 0) {
    c->in.erase(0, c->pos);
    c->scan -= std::min(c->scan, c->pos);
    c->pos = 0;
  }
}

void HttpFront::Impl::sweep() {
  const auto now = Clock::now();
  std::vector<Conn*> late;
  for (auto& [fd, c] : conns)
    if (c->phase != Phase::Dispatched && now >= c->deadline) late.push_back(c.get());
  for (Conn* c : late) {
    if (c->phase == Phase::Draining || (c->phase == Phase::Head && !c->started)) close_conn(*c);
    else reject(*c, 408, c->phase == Phase::Head ? "the request head took too long" : "the request body took too long");
  }
}

HttpFront::HttpFront(FrontOptions options, Dispatch dispatch, ErrorBody error_body) : impl_(std::make_unique<Impl>()) {
  impl_->o = std::move(options);
  impl_->dispatch = std::move(dispatch);
  impl_->error_body = std::move(error_body);
  // Each connection holds a descriptor; the default soft limit (often 1024) is far below what
  // idle clients may hold.
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 64)
    impl_->o.max_connections = std::min<size_t>(impl_->o.max_connections, rl.rlim_cur - 64);
}

HttpFront::~HttpFront() {
  stop();
  Impl& m = *impl_;
  for (auto& [fd, c] : m.conns) ::close(fd);
  for (int fd : {m.listen_fd, m.epoll_fd, m.wake_fd, m.spare_fd})
    if (fd >= 0) ::close(fd);
}

int HttpFront::listen(const std::string& host, int port) {
  Impl& m = *impl_;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res) != 0 || !res)
    fail("serve: cannot listen on {}:{} (not an address of this machine)", host, port);
  int fd = -1;
  for (addrinfo* a = res; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) fail("serve: cannot listen on {}:{} (address in use, or not an address of this machine)", host, port);
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  std::string addr;
  int bound = 0;
  describe(a, addr, bound);
  m.listen_fd = fd;
  return bound;
}

int HttpFront::listen_fd() const { return impl_->listen_fd; }

size_t HttpFront::connections() const { return impl_->n_conns.load(); }

void HttpFront::run() {
  Impl& m = *impl_;
  if (m.listen_fd < 0) fail("serve: run() before listen()");
  m.epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
  m.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  m.spare_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (m.epoll_fd < 0 || m.wake_fd < 0) fail("serve: cannot create the event loop: {}", std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = m.listen_fd;
  ::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.listen_fd, &ev);
  ev.data.fd = m.wake_fd;
  ::epoll_ctl(m.epoll_fd, EPOLL_CTL_ADD, m.wake_fd, &ev);
  for (int i = 0; i < std::max(1, m.o.workers); ++i) m.workers.emplace_back([&m] { m.worker(); });

  auto next_sweep = Clock::now() + kSweep;
  std::vector<epoll_event> events(256);
  while (!m.stopping) {
    const int n = ::epoll_wait(m.epoll_fd, events.data(), static_cast<int>(events.size()), static_cast<int>(kSweep.count()));
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd == m.listen_fd) {
        m.accept_all();
      } else if (fd == m.wake_fd) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(m.wake_fd, &v, sizeof v);
      } else if (auto it = m.conns.find(fd); it != m.conns.end() && it->second->phase != Phase::Dispatched) {
        m.on_readable(*it->second);
      }
    }
    std::vector<std::pair<Conn*, bool>> back;
    {
      std::lock_guard<std::mutex> lk(m.mu);
      back.swap(m.returned);
    }
    for (auto& [c, keep] : back) m.take_back(c, keep);
    if (Clock::now() >= next_sweep) {
      m.sweep();
      next_sweep = Clock::now() + kSweep;
    }
  }

  // Stopping: no new connections; idle and partial ones closed; queued requests still answered.
  ::epoll_ctl(m.epoll_fd, EPOLL_CTL_DEL, m.listen_fd, nullptr);
  ::close(m.listen_fd);
  m.listen_fd = -1;
  {
    std::lock_guard<std::mutex> lk(m.mu);
    m.workers_quit = true;
  }
  m.cv.notify_all();
  for (auto& t : m.workers) t.join();
  m.workers.clear();
  for (auto& [c, keep] : m.returned) c->phase = Phase::Dispatched;  // not in epoll any more
  m.returned.clear();
  std::vector<Conn*> all;
  for (auto& [fd, c] : m.conns) all.push_back(c.get());
  for (Conn* c : all) m.close_conn(*c);
}

void HttpFront::stop() {
  Impl& m = *impl_;
  if (m.stopping.exchange(true)) return;
  if (m.wake_fd >= 0) m.wake();
}

}  // namespace memra::serve

// Whether the client of a request being answered is still there, checked without reading from
// the connection.
//
// HTTP lets a client half-close (shutdown(SHUT_WR)) once its request is sent and still read the
// answer, and at the TCP level that looks exactly like a client that closed the socket: both
// arrive as end-of-file. So end-of-file alone cancels nothing. It makes the handler probe once
// with a write the client must accept (an interim "100 Continue" before the answer, an SSE
// comment inside a stream): a half-closed client reads past it, a closed one answers with a
// reset, and a reset or a failed write is what cancels.
#pragma once

namespace memra::serve {

class ConnectionProbe {
 public:
  explicit ConnectionProbe(int fd) : fd_(fd) {}
  // False once the connection was reset or failed (POLLERR / POLLHUP).
  bool alive() const;
  // The peer sent end-of-file: half-closed, or gone (which a probe write tells apart).
  bool peer_done() const;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

}  // namespace memra::serve

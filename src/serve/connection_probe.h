// Whether the client of an HTTP request is still connected, checked without reading from or
// writing to the connection.
//
// cpp-httplib 0.11 gives handlers no handle on the connection, only its addresses, so the probe
// finds the socket among the process's open descriptors by its (local, remote) address pair; the
// pair is unique among open TCP connections and the socket stays open while the handler runs.
// A peer that closed (or half-closed) the connection shows as POLLRDHUP / POLLHUP / POLLERR or as
// end-of-file on a MSG_PEEK. Linux only; where the socket cannot be found, alive() stays true and
// a failing write is the only sign of a lost client.
#pragma once

#include <string>

namespace memra::serve {

class ConnectionProbe {
 public:
  ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
  bool found() const { return fd_ >= 0; }
  bool alive() const;

 private:
  int fd_ = -1;
};

}  // namespace memra::serve

#include "serve/connection_probe.h"

#include <poll.h>

namespace memra::serve {

namespace {

short poll_now(int fd) {
  if (fd < 0) return 0;
  pollfd p{};
  p.fd = fd;
  p.events = POLLIN | POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return 0;
  return p.revents;
}

}  // namespace

bool ConnectionProbe::alive() const { return !(poll_now(fd_) & (POLLHUP | POLLERR | POLLNVAL)); }

bool ConnectionProbe::peer_done() const { return poll_now(fd_) & POLLRDHUP; }

}  // namespace memra::serve

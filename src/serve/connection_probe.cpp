#include "serve/connection_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>

namespace memra::serve {

namespace {

// Address text and port of a socket address, in the form httplib reports them.
bool describe(const sockaddr_storage& a, std::string& addr, int& port) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto* s = reinterpret_cast<const sockaddr_in*>(&a);
    if (!inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf)) return false;
    port = ntohs(s->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* s = reinterpret_cast<const sockaddr_in6*>(&a);
    if (!inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf)) return false;
    port = ntohs(s->sin6_port);
  } else {
    return false;
  }
  addr = buf;
  return true;
}

}  // namespace

ConnectionProbe::ConnectionProbe(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                 int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd < 0 || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0) continue;
    std::string la, ra;
    int lp = 0, rp = 0;
    if (!describe(local, la, lp) || !describe(peer, ra, rp)) continue;
    if (lp == local_port && rp == remote_port && ra == remote_addr && (local_addr.empty() || la == local_addr)) {
      fd_ = static_cast<int>(fd);
      break;
    }
  }
  closedir(dir);
}

bool ConnectionProbe::alive() const {
  if (fd_ < 0) return true;
  pollfd p{};
  p.fd = fd_;
  p.events = POLLIN | POLLRDHUP;
  if (poll(&p, 1, 0) <= 0) return true;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return false;
  if (p.revents & POLLIN) {
    // Readable: either the next pipelined request (alive) or end-of-file (gone).
    char c;
    const ssize_t n = recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n != 0;
  }
  return true;
}

}  // namespace memra::serve

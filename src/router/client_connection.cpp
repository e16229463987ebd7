#include "router/client_connection.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>

namespace densa::router {
namespace {

struct Endpoint {
  std::string addr;
  int port = -1;
};

std::optional<Endpoint> endpoint_of(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&ss);
    if (!inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf))) return std::nullopt;
    return Endpoint{buf, ntohs(a->sin_port)};
  }
  if (ss.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&ss);
    if (!inet_ntop(AF_INET6, &a->sin6_addr, buf, sizeof(buf))) return std::nullopt;
    return Endpoint{buf, ntohs(a->sin6_port)};
  }
  return std::nullopt;
}

// "::ffff:127.0.0.1" and "127.0.0.1" name the same peer.
bool same_addr(const std::string& a, const std::string& b) {
  constexpr std::string_view kMapped = "::ffff:";
  auto strip = [&](const std::string& s) {
    return s.rfind(kMapped, 0) == 0 ? std::string_view(s).substr(kMapped.size()) : std::string_view(s);
  };
  return strip(a) == strip(b);
}

}  // namespace

ClientConnection ClientConnection::find(const std::string& local_addr, int local_port, const std::string& remote_addr,
                                        int remote_port) {
  ClientConnection c;
  if (local_port <= 0 || remote_port <= 0) return c;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return c;
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t local_len = sizeof(local), peer_len = sizeof(peer);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &local_len) != 0) continue;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;
    const std::optional<Endpoint> l = endpoint_of(local), p = endpoint_of(peer);
    if (!l || !p || l->port != local_port || p->port != remote_port) continue;
    if (!same_addr(p->addr, remote_addr) || (!local_addr.empty() && !same_addr(l->addr, local_addr))) continue;
    c.fd_ = static_cast<int>(fd);
    break;
  }
  closedir(dir);
  return c;
}

bool ClientConnection::hung_up() const {
  if (!fd_) return false;
  pollfd p{*fd_, POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

}  // namespace densa::router

#pragma once
// ClientConnection: the socket a request arrived on, so the router notices a client that
// hung up while it waits on a worker (cpp-httplib 0.11 tells a handler nothing about its
// connection). Found by the connection's two endpoints among the process's sockets; valid
// only while the request's handler or content provider runs (httplib owns the socket).
#include <optional>
#include <string>

namespace densa::router {

class ClientConnection {
 public:
  // The accepted socket whose local and peer endpoints are these; nullopt if none matches
  // (then hung_up() is always false and only failed writes reveal a gone client).
  static ClientConnection find(const std::string& local_addr, int local_port, const std::string& remote_addr,
                               int remote_port);

  bool known() const { return fd_.has_value(); }
  // True once the peer closed its side (FIN or RST seen); never blocks.
  bool hung_up() const;

 private:
  std::optional<int> fd_;
};

}  // namespace densa::router

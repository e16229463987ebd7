#include "api/http_bind.h"

#include <httplib.h>

namespace densa::api {

void bind_port_exclusively(httplib::Server& http) {
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
}

}  // namespace densa::api

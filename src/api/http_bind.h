#pragma once
// How both HTTP fronts (densa serve, densa router) bind their port.
namespace httplib {
class Server;
}

namespace densa::api {

// Makes `http` bind its port alone: SO_REUSEADDR (a restart may take a port in TIME_WAIT) but
// not httplib's default SO_REUSEPORT, under which a second densa on a port already served (or
// a bind to port 0) silently shared it with the first and the kernel split the connections
// between them. Call before binding.
void bind_port_exclusively(httplib::Server& http);

}  // namespace densa::api

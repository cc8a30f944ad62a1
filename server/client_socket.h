// The socket a request came in on, found again from the handler, so that a handler waiting
// for its job (a non-streamed answer, a document being read) can tell that its client has
// gone and cancel the job. cpp-httplib 0.11 (Debian 12's) gives a handler no way to ask: a
// streamed answer learns it from a failed write, a waiting handler has nothing to write.
#pragma once
#include <string>

namespace infinipot::server {

class ClientSocket {
 public:
  // The connection whose ends are (local_port) and (remote_addr, remote_port), as
  // httplib::Request names them; not found() where the platform cannot say.
  ClientSocket(const std::string& remote_addr, int remote_port, int local_port);

  bool found() const { return fd_ >= 0; }
  // True once the client has closed or reset its end. Bytes waiting to be read (a pipelined
  // next request) mean it is still there. Never blocks.
  bool gone() const;

 private:
  int fd_ = -1;
};

}  // namespace infinipot::server

// One device, many clients: jobs run one at a time on a worker thread, in the order they came,
// from a bounded queue. A full queue refuses at once (the caller answers 503); nothing waits
// without bound. Each job's output travels to its HTTP handler through a Channel.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

namespace infinipot::server {

class DeviceQueue {
 public:
  explicit DeviceQueue(int max_waiting);
  ~DeviceQueue();  // stops: waiting jobs are dropped (their channels closed by their owners)
  // Queues a job; false (and the job dropped) when max_waiting jobs wait already.
  bool submit(std::function<void()> job);
  int waiting() const;  // jobs queued, not started
  bool busy() const { return busy_; }
  void stop();

 private:
  void run();
  const int max_waiting_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::atomic<bool> busy_{false};
  std::thread worker_;
};

// What a job sends its handler: answer pieces as they come, then one end (a result or an error).
struct Event {
  enum Kind { Piece, Done, Failed };
  Event(Kind kind, std::string text, nlohmann::json result = nullptr, int status = 200)
      : kind(kind), text(std::move(text)), result(std::move(result)), status(status) {}
  Kind kind;
  std::string text;       // Piece: the text
  nlohmann::json result;  // Done: the job's result; Failed: the error body
  int status;             // Failed: the HTTP status
};

class Channel {
 public:
  void send(Event e);
  // The next event, waiting at most timeout_ms (nullopt when none came).
  std::optional<Event> next(int timeout_ms);
  // The handler is gone (client disconnected): the job stops at its next token.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace infinipot::server

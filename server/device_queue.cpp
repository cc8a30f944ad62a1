#include "server/device_queue.h"

#include <chrono>

namespace infinipot::server {

DeviceQueue::DeviceQueue(int max_waiting) : max_waiting_(max_waiting), worker_([this] { run(); }) {}

DeviceQueue::~DeviceQueue() { stop(); }

bool DeviceQueue::submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(m_);
  if (stopping_ || static_cast<int>(jobs_.size()) >= max_waiting_) return false;
  jobs_.push_back(std::move(job));
  cv_.notify_one();
  return true;
}

int DeviceQueue::waiting() const {
  std::lock_guard<std::mutex> lock(m_);
  return static_cast<int>(jobs_.size());
}

void DeviceQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(m_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void DeviceQueue::run() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock<std::mutex> lock(m_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (stopping_) {
        // Dropped jobs still run, so that their handlers get an answer, but each one sees the
        // queue stopping through its channel (the server cancels them first).
        if (jobs_.empty()) return;
      }
      job = std::move(jobs_.front());
      jobs_.pop_front();
      busy_ = true;
    }
    job();  // jobs catch their own errors (server.cpp); nothing escapes into the worker
    busy_ = false;
  }
}

void Channel::send(Event e) {
  {
    std::lock_guard<std::mutex> lock(m_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

std::optional<Event> Channel::next(int timeout_ms) {
  std::unique_lock<std::mutex> lock(m_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); })) return std::nullopt;
  Event e = std::move(events_.front());
  events_.pop_front();
  return e;
}

}  // namespace infinipot::server

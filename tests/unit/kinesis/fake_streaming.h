// A streaming transport that answers from a script, for enhanced
// fan-out's tests: each request started is kept, and the test sends the
// pieces of its answer (bytes cut where it likes, an end, a lost
// connection). A wait with nothing to give lets the fake clock run.
#pragma once

#include <deque>
#include <string>
#include <vector>

#include "fakes.h"
#include "kpipe/kinesis/http.h"

namespace kpipe {

class FakeStreaming final : public StreamingTransport {
 public:
  struct Started {
    Id id = 0;
    std::string body;
    Millis at = 0;  // steady time
    bool cancelled = false;
  };

  explicit FakeStreaming(FakeClock& clock) : clock_(clock) {}

  Expected<Id> start(const HttpRequest& request) override {
    if (!refuse.empty()) return failure("{}", refuse);
    started.push_back({++last_, request.body, clock_.steady(), false});
    return last_;
  }
  void cancel(Id id) override {
    for (auto& s : started)
      if (s.id == id) s.cancelled = true;
  }
  Status wait(Millis wait, std::vector<Piece>& out) override {
    ++waits;
    if (queued.empty()) {
      clock_.sleep_for(wait);
      return {};
    }
    // One piece a wait: the cuts the test made are the reader's.
    out.push_back(std::move(queued.front()));
    queued.pop_front();
    return {};
  }

  // The last request started.
  const Started& last() const { return started.back(); }
  // Bytes of the last request's answer (status 200).
  void send(std::string bytes, long status = 200) {
    Piece p;
    p.id = last_;
    p.status = status;
    p.data = std::move(bytes);
    queued.push_back(std::move(p));
  }
  // The last request's answer ends; `error`: its connection was lost.
  void end(std::string error = "", long status = 200) {
    Piece p;
    p.id = last_;
    p.status = status;
    p.done = true;
    p.error = std::move(error);
    queued.push_back(std::move(p));
  }

  std::vector<Started> started;
  std::deque<Piece> queued;
  std::string refuse;  // start() fails with it when set
  int waits = 0;

 private:
  FakeClock& clock_;
  Id last_ = 0;
};

}  // namespace kpipe

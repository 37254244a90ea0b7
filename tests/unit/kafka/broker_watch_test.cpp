#include "kpipe/kafka/broker_watch.h"

#include <catch2/catch.hpp>

using namespace kpipe;
using News = BrokerWatch::News;

namespace {

// A broker that is up when the test says so, and counts the questions.
struct Broker {
  bool up = false;
  int asked = 0;
  std::function<bool()> probe() {
    return [this] {
      ++asked;
      return up;
    };
  }
};

}  // namespace

TEST_CASE("BrokerWatch: silent while the cluster is there", "[kafka_broker_watch]") {
  BrokerWatch watch(10 * kSecond);
  Broker broker;
  for (Millis t = 0; t < 60 * kSecond; t += 100)
    CHECK(watch.update(t, broker.probe()) == News::kNone);
  CHECK(broker.asked == 0);
  CHECK_FALSE(watch.down());
}

TEST_CASE("BrokerWatch: a broker dead mid-stream is said once, after --timeout, and its return too",
          "[kafka_broker_watch]") {
  BrokerWatch watch(10 * kSecond);
  Broker broker;
  watch.all_down(1000);
  CHECK(watch.down());
  int unreachable = 0;
  Millis said_at = 0;
  for (Millis t = 1000; t <= 40 * kSecond; t += 100) {
    if (watch.update(t, broker.probe()) == News::kUnreachable) {
      ++unreachable;
      said_at = t;
    }
  }
  CHECK(unreachable == 1);
  CHECK(said_at == 11 * kSecond);
  CHECK(watch.since() == 1000);
  // Asked about once a second, not at every poll.
  CHECK(broker.asked == 39);
  broker.up = true;
  News news = News::kNone;
  Millis t = 40 * kSecond;
  for (; news == News::kNone; t += 100) news = watch.update(t, broker.probe());
  CHECK(news == News::kBack);
  CHECK(t - 100 == 41 * kSecond);
  CHECK_FALSE(watch.down());
  CHECK(watch.update(t, broker.probe()) == News::kNone);
}

TEST_CASE("BrokerWatch: an outage shorter than --timeout passes silently", "[kafka_broker_watch]") {
  BrokerWatch watch(10 * kSecond);
  Broker broker;
  watch.all_down(0);
  // librdkafka says "all down" again while still down: the outage started
  // at the first.
  watch.all_down(3000);
  CHECK(watch.since() == 0);
  for (Millis t = 0; t < 5 * kSecond; t += 100)
    CHECK(watch.update(t, broker.probe()) == News::kNone);
  broker.up = true;
  for (Millis t = 5 * kSecond; t < 7 * kSecond; t += 100)
    CHECK(watch.update(t, broker.probe()) == News::kNone);
  CHECK_FALSE(watch.down());
  // A second outage is timed from its own start, and said again.
  broker.up = false;
  watch.all_down(20 * kSecond);
  CHECK(watch.update(29 * kSecond, broker.probe()) == News::kNone);
  CHECK(watch.update(30 * kSecond, broker.probe()) == News::kUnreachable);
}

#include "kpipe/watermark.h"

#include <catch2/catch.hpp>

#include <vector>

using namespace kpipe;

namespace {

const PartitionProgress& itself(const PartitionProgress& p) {
  return p;
}

PartitionProgress at(Millis newest, Millis last_read = 0) {
  PartitionProgress p;
  p.newest = newest;
  p.last_read = last_read;
  return p;
}

}  // namespace

TEST_CASE("lowest_newest: the lowest newest time of the partitions", "[watermark]") {
  std::vector<PartitionProgress> parts{at(500), at(300), at(900)};
  auto low = lowest_newest(parts, itself, 0, 0);
  CHECK(low.kind == LowestNewest::Kind::kTime);
  CHECK(low.newest == 300);
}

TEST_CASE("lowest_newest: a waiting partition holds it, a revoked one holds nothing",
          "[watermark]") {
  std::vector<PartitionProgress> parts{at(500), PartitionProgress{}};
  parts[1].waiting = true;
  CHECK(lowest_newest(parts, itself, 0, 0).kind == LowestNewest::Kind::kHeld);
  parts[1].revoked = true;
  auto low = lowest_newest(parts, itself, 0, 0);
  CHECK(low.kind == LowestNewest::Kind::kTime);
  CHECK(low.newest == 500);
  // A partition neither waiting nor with a time (revoked, then assigned
  // again with nothing read) holds nothing either.
  parts[1].revoked = false;
  parts[1].waiting = false;
  CHECK(lowest_newest(parts, itself, 0, 0).newest == 500);
}

TEST_CASE("lowest_newest: a partition silent for the idle timeout stops holding it back",
          "[watermark]") {
  std::vector<PartitionProgress> parts{at(100, 1000), at(800, 5000)};
  CHECK(lowest_newest(parts, itself, 4000, 4999).newest == 100);
  // At 5000 the first has been silent for 4000: idle.
  CHECK(lowest_newest(parts, itself, 4000, 5000).newest == 800);
  // Without an idle timeout nothing is ever idle.
  CHECK(lowest_newest(parts, itself, 0, 1'000'000).newest == 100);
  // Even a waiting partition stops holding it once idle.
  parts[0] = PartitionProgress{};
  parts[0].waiting = true;
  parts[0].last_read = 1000;
  CHECK(lowest_newest(parts, itself, 4000, 4000).kind == LowestNewest::Kind::kHeld);
  CHECK(lowest_newest(parts, itself, 4000, 5000).newest == 800);
}

TEST_CASE("lowest_newest: none holds it when every partition is idle, revoked or timeless",
          "[watermark]") {
  std::vector<PartitionProgress> none;
  CHECK(lowest_newest(none, itself, 0, 0).kind == LowestNewest::Kind::kNone);
  std::vector<PartitionProgress> parts{at(100, 0), PartitionProgress{}};
  parts[0].revoked = true;
  CHECK(lowest_newest(parts, itself, 0, 0).kind == LowestNewest::Kind::kNone);
}

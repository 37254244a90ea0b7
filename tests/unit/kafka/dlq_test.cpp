// The Kafka side of the dead-letter store against librdkafka's mock
// cluster, in process: the sink's records, the topic read back as a store,
// the consumer group as the replay ledger, a topic as the target.
#include "kpipe/kafka/dlq.h"
#include "kpipe/programs/dlq_targets.h"

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "fakes.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/store/dlq_store.h"

namespace kpipe {
namespace {

using namespace std::string_literals;

struct Cluster {
  RecordingReporter reporter;
  SystemClock clock;
  std::unique_ptr<MockCluster> mock;
  KafkaConfig config;

  explicit Cluster(const std::vector<std::pair<std::string, int>>& topics) {
    auto m = MockCluster::create(1, reporter);
    REQUIRE(m.ok());
    mock = std::move(*m);
    for (const auto& [name, parts] : topics) REQUIRE(mock->create_topic(name, parts).ok());
    KafkaOptions o;
    o.brokers = mock->bootstraps();
    auto c = resolve_kafka_config(o, nullptr);
    REQUIRE(c.ok());
    config = *c;
  }

  std::unique_ptr<KafkaDlq> dlq(const std::string& topic, const std::string& group = "") {
    auto d = KafkaDlq::open(topic, config, group, reporter, clock);
    if (!d) FAIL(d.error().message);
    return std::move(*d);
  }

  // Every record of a topic, in partition then offset order.
  std::vector<DlqEntry> read_all(const std::string& topic) {
    auto d = dlq(topic);
    REQUIRE(d->start({}).ok());
    std::vector<DlqEntry> out;
    for (;;) {
      auto batch = d->read(100);
      REQUIRE(batch.ok());
      if (batch->empty()) return out;
      for (auto& e : *batch) out.push_back(std::move(e));
    }
  }
};

std::string padded(const std::string& s) {
  return s + std::string(kJsonPadding, '\0');
}

// Writes dead letters through the sink every program uses.
void write_dead_letters(Cluster& c, const std::string& topic,
                        const std::vector<std::string>& lines) {
  KafkaOptions o;
  o.brokers = c.mock->bootstraps();
  auto log = KafkaLog::open(o, nullptr, c.reporter, c.clock);
  REQUIRE(log.ok());
  auto sink = open_dead_letter_sink("kafka:" + topic, &*log, c.reporter, c.clock);
  REQUIRE(sink.ok());
  FakeClock clock(1795946400010);
  BadInputHandler bad(OnError::kDlq, std::move(*sink), "kdlq-guard", clock);
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string p = padded(lines[i]);
    Line line;
    line.text = std::string_view(p.data(), lines[i].size());
    line.number = i + 1;
    REQUIRE(bad.handle("<stdin>", line, "field '.value.ts' is missing").ok());
  }
  REQUIRE(bad.sync().ok());
}

std::string envelope(int i) {
  return fmt::format(
      "{{\"topic\":\"events\",\"partition\":{},\"offset\":{},\"timestamp\":{},\"key\":\"k{}\","
      "\"headers\":[[\"trace\",\"t{}\"]],\"value\":{{\"n\":{}}}}}",
      i % 3, 100 + i, 1764412345000 + i, i, i, i);
}

const Header* find_header(const RecordView& r, std::string_view name) {
  for (const auto& h : r.headers)
    if (h.name == name) return &h;
  return nullptr;
}

TEST_CASE("dead letters written to a topic read back as entries, lines byte for byte",
          "[dlq_kafka]") {
  Cluster c({{"dlq", 3}});
  std::vector<std::string> lines = {
      envelope(0), "{\"broken\":", "bin\xff\0ary"s, envelope(1),
      "{\"topic\":\"events\",\"partition\":0,\"offset\":9,\"value\": { \"n\" : 1 }}"};
  write_dead_letters(c, "dlq", lines);
  auto entries = c.read_all("dlq");
  REQUIRE(entries.size() == lines.size());
  std::map<std::string, const DlqEntry*> by_payload;
  for (const auto& e : entries) by_payload[e.payload] = &e;
  for (size_t i = 0; i < lines.size(); ++i) {
    INFO(preview(lines[i], 200));
    REQUIRE(by_payload.count(lines[i]) == 1);
    const DlqEntry& e = *by_payload[lines[i]];
    CHECK(e.stage == "kdlq-guard");
    CHECK(e.reason == fmt::format("line {}: field '.value.ts' is missing", i + 1));
    CHECK(e.line == static_cast<int64_t>(i + 1));
    CHECK(e.at == 1795946400010);
    CHECK(e.position);
  }
  CHECK(by_payload[lines[0]]->source->offset == 100);
  CHECK(by_payload[lines[0]]->record->key == "k0");
  CHECK_FALSE(by_payload[lines[1]]->source);
  // Entries come partition by partition, each in offset order.
  for (size_t i = 1; i < entries.size(); ++i) {
    const auto& a = *entries[i - 1].position;
    const auto& b = *entries[i].position;
    CHECK((a.partition < b.partition || (a.partition == b.partition && a.offset < b.offset)));
  }
}

// A target that learns every delivery but, as if killed, reports only the
// first `acks` of them: the rest arrived without the ledger knowing.
class DyingTarget final : public ReplayTarget {
 public:
  DyingTarget(ReplayTarget& inner, size_t acks) : inner_(inner), acks_(acks) {}
  std::string describe() const override { return inner_.describe(); }
  bool acknowledges_later() const override { return true; }
  Expected<bool> send(const ReplayItem& item, uint64_t tag) override {
    return inner_.send(item, tag);
  }
  Status flush(std::vector<uint64_t>& delivered) override {
    std::vector<uint64_t> all;
    KPIPE_TRY(inner_.flush(all));
    for (uint64_t tag : all) {
      if (acks_ == 0) return failure("killed");
      --acks_;
      delivered.push_back(tag);
    }
    return {};
  }
  Expected<std::string> mark() override { return inner_.mark(); }
  Expected<std::set<std::string>> delivered_since(const std::string& m, const std::string& p,
                                                  const std::vector<ReplayItem>& e) override {
    return inner_.delivered_since(m, p, e);
  }

 private:
  ReplayTarget& inner_;
  size_t acks_;
};

// The target holds each entry's value once (values are distinct).
void check_replayed_once(Cluster& c, const std::string& topic,
                         const std::vector<std::string>& lines) {
  std::multiset<std::string> values;
  for (const auto& e : c.read_all(topic)) values.insert(e.payload);
  std::multiset<std::string> want;
  for (size_t i = 0; i < lines.size(); ++i) want.insert(fmt::format("{{\"n\":{}}}", i));
  CHECK(values == want);
}

TEST_CASE("a replay from a Kafka dead-letter topic, killed and run again, sends each entry once",
          "[dlq_kafka]") {
  const size_t n = 12;
  std::vector<std::string> lines;
  for (size_t i = 0; i < n; ++i) lines.push_back(envelope(static_cast<int>(i)));
  for (size_t acks : {size_t{0}, size_t{5}, n - 1}) {
    INFO("killed after " << acks << " acknowledged");
    Cluster c({{"dlq", 2}, {"fixed", 3}});
    write_dead_letters(c, "dlq", lines);
    {
      auto dlq = c.dlq("dlq");
      auto ledger = make_group_ledger(*dlq, {}, 0);
      REQUIRE(ledger.ok());
      auto target = make_kafka_target("fixed", c.config, c.reporter, c.clock);
      REQUIRE(target.ok());
      DyingTarget dying(**target, acks);
      ReplaySettings settings;
      settings.batch = 5;
      auto r = run_replay(**ledger, dying, settings);
      REQUIRE_FALSE(r.ok());
    }
    auto dlq = c.dlq("dlq");
    auto position = dlq->position();
    REQUIRE(position.ok());
    CHECK_FALSE(position->metadata.empty());  // the mark of the batch in flight
    auto ledger = make_group_ledger(*dlq, {}, 0);
    auto target = make_kafka_target("fixed", c.config, c.reporter, c.clock);
    REQUIRE(target.ok());
    auto r = run_replay(**ledger, **target, {});
    REQUIRE(r.ok());
    // Found: what arrived unacknowledged, and acknowledged entries the
    // position could not pass yet (an earlier one was not acknowledged).
    CHECK(r->found_delivered > 0);
    CHECK(r->found_delivered + r->replayed + acks >= n);
    check_replayed_once(c, "fixed", lines);
    position = c.dlq("dlq")->position();
    CHECK(position->metadata.empty());
    for (const auto& [p, next] : position->next) CHECK(next == dlq->bounds().at(p).high);
  }
}

TEST_CASE("replayed records keep key, headers and timestamp, and name the entry they replay",
          "[dlq_kafka]") {
  Cluster c({{"dlq", 1}, {"fixed", 1}});
  write_dead_letters(c, "dlq", {envelope(4), "plain line"});
  auto dlq = c.dlq("dlq");
  auto ledger = make_group_ledger(*dlq, {}, 0);
  auto target = make_kafka_target("fixed", c.config, c.reporter, c.clock);
  REQUIRE(run_replay(**ledger, **target, {}).ok());
  auto consumer = Consumer::create(c.config, "", c.reporter, c.clock);
  REQUIRE(consumer.ok());
  REQUIRE((*consumer)->assign({{"fixed", 0, 0}}).ok());
  std::vector<std::string> seen;
  while (seen.size() < 2) {
    REQUIRE((*consumer)
                ->poll(100, 10,
                       [&](const LogEvent& e) -> Status {
                         if (e.kind != LogEvent::Kind::kRecord) return {};
                         const RecordView& r = e.record;
                         const Header* id = find_header(r, "kpipe.replay.id");
                         REQUIRE(id != nullptr);
                         if (r.offset == 0) {
                           CHECK(r.key == "k4");
                           CHECK(r.value == "{\"n\":4}");
                           CHECK(r.timestamp == 1764412345004);
                           REQUIRE(r.headers.size() == 2);
                           CHECK(r.headers[0].name == "trace");
                           CHECK(r.headers[0].value == "t4");
                           CHECK(id->value == "kafka:dlq:0:0");
                         } else {
                           CHECK_FALSE(r.key);
                           CHECK(r.value == "plain line");
                           CHECK(r.headers.size() == 1);
                           CHECK(id->value == "kafka:dlq:0:1");
                         }
                         seen.emplace_back(*r.value);
                         return {};
                       })
                .ok());
  }
}

TEST_CASE("a replay from the SQLite store to Kafka, killed and run again, sends each entry once",
          "[dlq_kafka]") {
  const size_t n = 9;
  std::vector<std::string> lines;
  for (size_t i = 0; i < n; ++i) lines.push_back(envelope(static_cast<int>(i)));
  Cluster c({{"fixed", 2}});
  auto store = DlqStore::open(":memory:");
  REQUIRE(store.ok());
  std::vector<DeadLetter> letters;
  for (const auto& l : lines) {
    DeadLetter d;
    d.stage = "kdedup";
    d.reason = "line 1: r";
    d.payload = l;
    std::string p = padded(l);
    d.source = source_position(std::string_view(p.data(), l.size()));
    letters.push_back(d);
  }
  REQUIRE((*store)->add(letters).ok());
  FakeClock clock(1);
  {
    auto ledger = make_store_ledger(**store, {}, 0, clock);
    auto target = make_kafka_target("fixed", c.config, c.reporter, c.clock);
    REQUIRE(target.ok());
    DyingTarget dying(**target, 4);
    ReplaySettings settings;
    settings.batch = 3;
    REQUIRE_FALSE(run_replay(**ledger, dying, settings).ok());
  }
  CHECK((*store)->in_doubt()->size() == 1);
  auto ledger = make_store_ledger(**store, {}, 0, clock);
  auto target = make_kafka_target("fixed", c.config, c.reporter, c.clock);
  auto r = run_replay(**ledger, **target, {});
  REQUIRE(r.ok());
  CHECK(r->in_doubt == 2);  // batch 2: one of its three was acknowledged
  CHECK(r->found_delivered == 2);
  CHECK(r->replayed == n - 6);
  check_replayed_once(c, "fixed", lines);
}

TEST_CASE("a filtered replay with its own group passes over the rest without marking them",
          "[dlq_kafka]") {
  Cluster c({{"dlq", 1}, {"fixed", 1}});
  write_dead_letters(c, "dlq", {envelope(0), "plain", envelope(2)});
  auto dlq = c.dlq("dlq", "only-envelopes");
  DlqFilter f;
  f.source_topic = "events";
  auto ledger = make_group_ledger(*dlq, f, 0);
  auto target = make_kafka_target("fixed", c.config, c.reporter, c.clock);
  auto r = run_replay(**ledger, **target, {});
  REQUIRE(r.ok());
  CHECK(r->replayed == 2);
  // The default group has replayed nothing.
  auto default_position = c.dlq("dlq")->position();
  CHECK(default_position->next.at(0) == 0);
  CHECK(c.dlq("dlq", "only-envelopes")->position()->next.at(0) == 3);
}

}  // namespace
}  // namespace kpipe

// kconsume's checkpoints over a real SQLite state store in a temporary
// folder: the lines it emits, the wait for their completion and the
// mirror into the group (against librdkafka's mock cluster).
#include "kpipe/programs/kconsume_checkpoints.h"

#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <memory>
#include <string>

#include "fakes.h"
#include "helpers.h"
#include "kpipe/control.h"
#include "kpipe/kafka/kafka_log.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/programs/dlq_targets.h"
#include "kpipe/stage/bad_input.h"
#include "kpipe/store/state_store.h"

using namespace kpipe;

namespace {

constexpr Millis kStart = 1795946400000;

// A kconsume's checkpoints over a state store in a temporary folder,
// writing to a file, its consumer on a mock cluster with topic "t".
struct Fixture {
  explicit Fixture(std::string group = "") {
    auto created_mock = MockCluster::create(1, kafka_reporter);
    REQUIRE(created_mock.ok());
    mock = std::move(*created_mock);
    REQUIRE(mock->create_topic("t", 2).ok());
    options.topics = {"t"};
    options.group = std::move(group);
    options.state = dir.file("state.db");
    auto opened = StateStore::open(options.state);
    REQUIRE(opened.ok());
    store = std::move(*opened);
    fd = ::open(dir.file("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(fd >= 0);
    out = std::make_unique<Output>(fd);
    io = std::make_unique<Io>(Io{*out, reporter, clock, nullptr, "kconsume", nullptr, false});
    auto handler = make_bad_input_handler(ErrorOptions{"fail", ""}, "kconsume", *io);
    REQUIRE(handler.ok());
    bad = std::move(*handler);
    KafkaOptions k;
    k.brokers = mock->bootstraps();
    auto log = KafkaLog::open(k, nullptr, kafka_reporter, system_clock);
    REQUIRE(log.ok());
    KafkaLog::ReaderSettings settings;
    settings.group = options.group;
    auto created = log->reader(settings);
    REQUIRE(created.ok());
    reader = std::move(*created);
  }
  ~Fixture() {
    checkpoints.reset();
    out.reset();
    ::close(fd);
  }

  ConsumeCheckpoints& start(Millis interval = 5 * kSecond) {
    checkpoints = std::make_unique<ConsumeCheckpoints>(options, *store, reader, *io, positions,
                                                       *bad, interval, /*instance=*/false);
    REQUIRE(checkpoints->init().ok());
    checkpoints->start(clock.steady());
    return *checkpoints;
  }

  // The checkpoint line kconsume writes for `c`.
  static std::string line(const Checkpoint& c) {
    std::string s;
    append_checkpoint(s, c);
    return s;
  }

  std::string written() const { return test::read_file(dir.file("out")); }

  RecordingReporter kafka_reporter;  // librdkafka's words, apart
  // The consumer's: its waits are librdkafka's real ones. (The fake clock
  // below is the program's, which the interval test moves.)
  SystemClock system_clock;
  std::unique_ptr<MockCluster> mock;
  test::TempDir dir;
  ConsumeOptions options;
  std::unique_ptr<StateStore> store;
  FakeClock clock{kStart};
  RecordingReporter reporter;
  int fd = -1;
  std::unique_ptr<Output> out;
  std::unique_ptr<Io> io;
  std::unique_ptr<BadInputHandler> bad;
  OpenedReader reader;
  ConsumePositions positions{EndPosition{}};
  std::unique_ptr<ConsumeCheckpoints> checkpoints;
};

}  // namespace

TEST_CASE("kconsume checkpoints: a line with every partition's next offset, recorded as emitted",
          "[consume]") {
  Fixture f;
  ConsumeCheckpoints& checkpoints = f.start();
  // Before any partition is held there is no position to save.
  REQUIRE(checkpoints.emit().ok());
  CHECK(checkpoints.last_emitted() == 0);
  CHECK(f.written().empty());

  f.positions.track({"t", 0, 5});
  f.positions.track({"t", 1, 0});
  REQUIRE(f.positions.read(*f.positions.find("t", 0), 5, 6));
  checkpoints.record(kStart - 1000);
  REQUIRE(checkpoints.emit().ok());
  CHECK(checkpoints.last_emitted() == 1);
  Checkpoint first{1, kStart, {{"t", 0, 6}, {"t", 1, 0}}, "", ""};
  CHECK(f.written() == Fixture::line(first));

  f.clock.advance(kSecond);
  REQUIRE(checkpoints.emit().ok());
  Checkpoint second{2, kStart + kSecond, {{"t", 0, 6}, {"t", 1, 0}}, "", ""};
  CHECK(f.written() == Fixture::line(first) + Fixture::line(second));
  auto records = f.store->checkpoints();
  REQUIRE(records.ok());
  REQUIRE(records->size() == 2);
  CHECK((*records)[0].id == 1);
  CHECK((*records)[0].emitted_at == kStart);
  CHECK(!(*records)[0].completed_at);
  CHECK((*records)[1].emitted_at == kStart + kSecond);
}

TEST_CASE("kconsume checkpoints: ids go on from the store's, and positions resume from it",
          "[consume]") {
  Fixture f;
  REQUIRE(f.store->record_emitted(1, kStart - 2000).ok());
  REQUIRE(f.store->record_emitted(2, kStart - 1000).ok());
  Checkpoint done{2, kStart - 1000, {{"t", 0, 40}}, "", ""};
  REQUIRE(f.store->complete(done, "kcheckpoint", kStart - 500).ok());
  ConsumeCheckpoints& checkpoints = f.start();
  CHECK(checkpoints.saved_position({"t", 0}) == 40);
  CHECK_FALSE(checkpoints.saved_position({"t", 1}).has_value());
  f.positions.track({"t", 0, 40});
  REQUIRE(checkpoints.emit().ok());
  CHECK(checkpoints.last_emitted() == 3);
  // Without a group nothing completes the ungrouped wait: finish emits the
  // final checkpoint and returns.
  REQUIRE(checkpoints.finish().ok());
  CHECK(checkpoints.last_emitted() == 4);
  CHECK(f.reporter.infos.empty());
}

TEST_CASE("kconsume checkpoints: one is due at each interval, not before", "[consume]") {
  Fixture f;
  ConsumeCheckpoints& checkpoints = f.start(5 * kSecond);
  f.positions.track({"t", 0, 0});
  f.clock.advance(4999);
  REQUIRE(checkpoints.tick(f.clock.steady()).ok());
  CHECK(checkpoints.last_emitted() == 0);
  f.clock.advance(1);
  REQUIRE(checkpoints.tick(f.clock.steady()).ok());
  CHECK(checkpoints.last_emitted() == 1);
  f.clock.advance(4999);
  REQUIRE(checkpoints.tick(f.clock.steady()).ok());
  CHECK(checkpoints.last_emitted() == 1);
  // The mirror's timer, without a group, asks nothing of the broker.
  REQUIRE(checkpoints.on_tick(f.clock.steady() + kSecond).ok());
}

TEST_CASE("kconsume checkpoints: a reader gone ends the wait for a checkpoint to complete",
          "[consume]") {
  auto previous = std::signal(SIGPIPE, SIG_IGN);
  Fixture f("g");
  // Its reader gone, kconsume's output goes to a closed pipe.
  test::Pipe pipe;
  pipe.close_read();
  Output closed(pipe.write_end);
  Io io{closed, f.reporter, f.clock, nullptr, "kconsume", nullptr, false};
  ConsumeCheckpoints checkpoints(f.options, *f.store, f.reader, io, f.positions, *f.bad,
                                 5 * kSecond,
                                 /*instance=*/false);
  REQUIRE(checkpoints.init().ok());
  f.positions.track({"t", 0, 7});
  REQUIRE(checkpoints.hand_over().ok());
  std::signal(SIGPIPE, previous);
  CHECK(checkpoints.last_emitted() == 1);
  CHECK(f.reporter.infos ==
        std::vector<std::string>{"checkpoint 1 not complete yet; the group keeps its last complete "
                                 "offsets"});
}

TEST_CASE("kconsume checkpoints: what a transactional kproduce completed is not mirrored again",
          "[consume]") {
  Fixture f("g");
  ConsumeCheckpoints& checkpoints = f.start();
  f.positions.track({"t", 0, 3});
  REQUIRE(checkpoints.emit().ok());
  Checkpoint c{1, kStart, {{"t", 0, 3}}, "g", ""};
  REQUIRE(f.store->complete(c, kTransactionCompleter, kStart).ok());
  REQUIRE(checkpoints.hand_over().ok());  // complete already: no wait, no commit
  CHECK(checkpoints.last_emitted() == 1);
  CHECK(f.reporter.infos.empty());
  auto committed = f.reader.offsets->committed({{"t", 0}});
  REQUIRE(committed.ok());
  CHECK_FALSE((*committed)[0].has_value());
}

TEST_CASE("kconsume checkpoints: a complete checkpoint is mirrored into the group", "[consume]") {
  Fixture f("g");
  ConsumeCheckpoints& checkpoints = f.start();
  f.positions.track({"t", 0, 3});
  f.positions.track({"t", 1, 8});
  REQUIRE(checkpoints.emit().ok());
  Checkpoint c{1, kStart, {{"t", 0, 3}, {"t", 1, 8}}, "g", ""};
  REQUIRE(f.store->complete(c, "kcheckpoint", kStart).ok());
  REQUIRE(checkpoints.hand_over().ok());
  auto committed = f.reader.offsets->committed({{"t", 0}, {"t", 1}});
  REQUIRE(committed.ok());
  REQUIRE((*committed)[0].has_value());
  REQUIRE((*committed)[1].has_value());
  CHECK(*(*committed)[0] == 3);
  CHECK(*(*committed)[1] == 8);
}

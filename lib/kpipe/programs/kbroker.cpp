#include "kpipe/programs/kbroker.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>

#include "kpipe/choices.h"
#include "kpipe/kafka/mock_cluster.h"
#include "kpipe/kafka/topic.h"

namespace kpipe {

Expected<TopicSpec> parse_topic_spec(const std::string& text, int default_partitions) {
  TopicSpec spec;
  size_t colon = text.rfind(':');
  spec.name = text.substr(0, colon);
  spec.partitions = default_partitions;
  if (colon != std::string::npos) {
    std::string_view count = std::string_view(text).substr(colon + 1);
    auto r = std::from_chars(count.data(), count.data() + count.size(), spec.partitions);
    if (r.ec != std::errc() || r.ptr != count.data() + count.size() || spec.partitions < 1 ||
        spec.partitions > 10000)
      return usage_error("--topic '{}': the partition count must be a number from 1 to 10000",
                         text);
  }
  if (spec.name.empty()) return usage_error("--topic '{}': the topic name is missing", text);
  if (Status valid = check_topic_name(spec.name); !valid.ok())
    return usage_error("--topic '{}': {}", text, valid.error().message);
  return spec;
}

namespace {

// The request types a fault can name, as Kafka's protocol numbers and
// spells them: those the mock serves that kpipe's clients send.
struct ApiName {
  const char* name;
  int key;
};
constexpr ApiName kApis[] = {
    {"Produce", 0},          {"Fetch", 1},
    {"ListOffsets", 2},      {"Metadata", 3},
    {"OffsetCommit", 8},     {"OffsetFetch", 9},
    {"FindCoordinator", 10}, {"JoinGroup", 11},
    {"Heartbeat", 12},       {"LeaveGroup", 13},
    {"SyncGroup", 14},       {"DescribeGroups", 15},
    {"ListGroups", 16},      {"ApiVersions", 18},
    {"InitProducerId", 22},  {"AddPartitionsToTxn", 24},
    {"AddOffsetsToTxn", 25}, {"EndTxn", 26},
    {"TxnOffsetCommit", 28},
};

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

std::vector<std::string_view> split_words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    size_t start = i;
    while (i < line.size() && !is_space(line[i])) ++i;
    if (i > start) words.push_back(line.substr(start, i - start));
  }
  return words;
}

// A choice matched without regard to case, suggested in its own spelling.
Expected<size_t> parse_choice_nocase(std::string_view what, std::string_view word,
                                     const std::vector<std::string>& choices) {
  std::vector<std::string> lowered;
  for (const auto& c : choices) lowered.push_back(lower(c));
  std::string w = lower(word);
  for (size_t i = 0; i < lowered.size(); ++i)
    if (lowered[i] == w) return i;
  std::string near = closest_choice(w, lowered);
  for (size_t i = 0; i < lowered.size(); ++i)
    if (!near.empty() && lowered[i] == near)
      return usage_error("unknown {} '{}', did you mean '{}'?", what, word, choices[i]);
  return unknown_choice(what, word, choices);
}

Expected<int> parse_number(std::string_view what, std::string_view word, int min, int max) {
  int n = 0;
  auto r = std::from_chars(word.data(), word.data() + word.size(), n);
  if (r.ec != std::errc() || r.ptr != word.data() + word.size() || n < min || n > max)
    return usage_error("{} '{}' is not a number from {} to {}", what, word, min, max);
  return n;
}

// A broker's number, or "all" where all may be meant.
Expected<int> parse_broker(std::string_view word, bool all_allowed) {
  if (all_allowed && lower(word) == "all") return FaultCommand::kAllBrokers;
  return parse_number("broker", word, 1, 1000);
}

// Kafka's error names: upper-case letters, digits and '_' ("NOT_COORDINATOR").
Expected<std::string> parse_error_name(std::string_view word) {
  std::string name = upper(word);
  for (char c : name)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return usage_error("'{}' is not a Kafka error name (such as NOT_LEADER_OR_FOLLOWER)", word);
  if (name.empty() || name[0] == '_')
    return usage_error("'{}' is not a Kafka error name (such as NOT_LEADER_OR_FOLLOWER)", word);
  return name;
}

Status word_count(std::string_view usage, const std::vector<std::string_view>& words, size_t min,
                  size_t max) {
  if (words.size() < min || words.size() > max) return usage_error("usage: {}", usage);
  return {};
}

}  // namespace

bool is_blank_control_line(std::string_view line) {
  auto words = split_words(line);
  return words.empty() || words[0].front() == '#';
}

Expected<FaultCommand> parse_fault_command(std::string_view line) {
  auto words = split_words(line);
  if (words.empty()) return usage_error("an empty command");
  static const std::vector<std::string> kCommands = {
      "error", "clear", "down", "up", "rtt", "coordinator", "leader", "topic-error"};
  auto which = parse_choice_nocase("command", words[0], kCommands);
  if (!which) return which.take_error();
  FaultCommand c;
  c.kind = static_cast<FaultCommand::Kind>(*which);
  auto api = [&](std::string_view word) -> Status {
    std::vector<std::string> names;
    for (const auto& a : kApis) names.emplace_back(a.name);
    auto i = parse_choice_nocase("request type", word, names);
    if (!i) return i.take_error();
    c.api_key = kApis[*i].key;
    c.api_name = kApis[*i].name;
    return {};
  };
  switch (c.kind) {
    case FaultCommand::Kind::kError: {
      KPIPE_TRY(word_count("error REQUEST [COUNT] ERROR", words, 3, 4));
      KPIPE_TRY(api(words[1]));
      if (words.size() == 4) {
        auto n = parse_number("count", words[2], 1, 100000);
        if (!n) return n.take_error();
        c.count = *n;
      }
      auto e = parse_error_name(words.back());
      if (!e) return e.take_error();
      c.error = *e;
      return c;
    }
    case FaultCommand::Kind::kClear:
      KPIPE_TRY(word_count("clear REQUEST", words, 2, 2));
      KPIPE_TRY(api(words[1]));
      return c;
    case FaultCommand::Kind::kDown:
    case FaultCommand::Kind::kUp: {
      KPIPE_TRY(word_count(
          c.kind == FaultCommand::Kind::kDown ? "down BROKER|all" : "up BROKER|all", words, 2, 2));
      auto b = parse_broker(words[1], true);
      if (!b) return b.take_error();
      c.broker = *b;
      return c;
    }
    case FaultCommand::Kind::kRtt: {
      KPIPE_TRY(word_count("rtt BROKER|all DURATION", words, 3, 3));
      auto b = parse_broker(words[1], true);
      if (!b) return b.take_error();
      c.broker = *b;
      auto d = parse_duration(words[2]);
      if (!d) return d.take_error();
      if (*d > kHour) return usage_error("a round trip of more than an hour ('{}')", words[2]);
      c.rtt = *d;
      return c;
    }
    case FaultCommand::Kind::kCoordinator: {
      KPIPE_TRY(word_count("coordinator group|transaction ID BROKER", words, 4, 4));
      auto t = parse_choice_nocase("coordinator type", words[1], {"group", "transaction"});
      if (!t) return t.take_error();
      c.key_type = *t == 0 ? "group" : "transaction";
      c.key = std::string(words[2]);
      auto b = parse_broker(words[3], false);
      if (!b) return b.take_error();
      c.broker = *b;
      return c;
    }
    case FaultCommand::Kind::kLeader: {
      KPIPE_TRY(word_count("leader TOPIC PARTITION BROKER|none", words, 4, 4));
      c.topic = std::string(words[1]);
      KPIPE_TRY(check_topic_name(c.topic));
      auto p = parse_number("partition", words[2], 0, 9999);
      if (!p) return p.take_error();
      c.partition = *p;
      if (lower(words[3]) == "none") {
        c.broker = FaultCommand::kNoLeader;
        return c;
      }
      auto b = parse_broker(words[3], false);
      if (!b) return b.take_error();
      c.broker = *b;
      return c;
    }
    case FaultCommand::Kind::kTopicError: {
      KPIPE_TRY(word_count("topic-error TOPIC ERROR", words, 3, 3));
      c.topic = std::string(words[1]);
      KPIPE_TRY(check_topic_name(c.topic));
      auto e = parse_error_name(words[2]);
      if (!e) return e.take_error();
      c.error = *e;
      return c;
    }
  }
  return usage_error("unknown command '{}'", words[0]);
}

namespace {

// SIGUSR1 takes the brokers down, SIGUSR2 brings them back (kbroker(1)):
// the handler only records which came last; the serving loop applies it.
std::atomic<int> wanted_state{0};  // 0: no change, 1: down, 2: up

void on_outage_signal(int sig) {
  wanted_state.store(sig == SIGUSR1 ? 1 : 2, std::memory_order_relaxed);
}

void install_outage_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_outage_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  sigaction(SIGUSR2, &sa, nullptr);
}

// Every broker, or the one a command names.
Status for_brokers(MockCluster& cluster, int broker, const std::function<Status(int)>& apply) {
  if (broker != FaultCommand::kAllBrokers) return apply(broker);
  for (int id = 1; id <= cluster.broker_count(); ++id) KPIPE_TRY(apply(id));
  return {};
}

Status apply_fault(MockCluster& cluster, const FaultCommand& c) {
  using Kind = FaultCommand::Kind;
  switch (c.kind) {
    case Kind::kError:
      return cluster.push_request_errors(c.api_key, c.count, c.error);
    case Kind::kClear:
      cluster.clear_request_errors(c.api_key);
      return {};
    case Kind::kDown:
    case Kind::kUp:
      return for_brokers(cluster, c.broker,
                         [&](int id) { return cluster.set_broker_up(id, c.kind == Kind::kUp); });
    case Kind::kRtt:
      return for_brokers(cluster, c.broker,
                         [&](int id) { return cluster.set_broker_rtt(id, c.rtt); });
    case Kind::kCoordinator:
      return cluster.set_coordinator(c.key_type, c.key, c.broker);
    case Kind::kLeader:
      return cluster.set_partition_leader(c.topic, c.partition, c.broker);
    case Kind::kTopicError:
      return cluster.set_topic_error(c.topic, c.error);
  }
  return failure("unknown command");
}

// --control: lines from a FIFO (held open for reading and writing, so
// that it never ends however many writers come and go) or from standard
// input (read until it ends).
class ControlChannel {
 public:
  ~ControlChannel() {
    if (fd_ > 0) ::close(fd_);
    if (created_) ::unlink(path_.c_str());
  }

  Status open(const std::string& path) {
    path_ = path;
    if (path == "-") {
      fd_ = 0;
      return {};
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      if (errno != ENOENT) return failure("--control '{}': {}", path, std::strerror(errno));
      if (::mkfifo(path.c_str(), 0600) != 0)
        return failure("--control '{}': cannot make a FIFO: {}", path, std::strerror(errno));
      created_ = true;
    } else if (!S_ISFIFO(st.st_mode)) {
      return failure(
          "--control '{}': not a FIFO (make it with mkfifo, or name a path that does "
          "not exist)",
          path);
    }
    fd_ = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd_ < 0) return failure("--control '{}': {}", path, std::strerror(errno));
    return {};
  }

  int fd() const { return fd_; }

  // Reads what is there (poll said so) and returns the complete lines; at
  // the end of standard input the channel closes.
  std::vector<std::string> read_lines() {
    std::vector<std::string> lines;
    char buf[4096];
    ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return lines;
    if (n <= 0) {
      if (!pending_.empty()) lines.push_back(std::move(pending_));
      pending_.clear();
      fd_ = -1;
      return lines;
    }
    pending_.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending_.find('\n', start)) != std::string::npos; start = nl + 1) {
      if (skipping_) {
        skipping_ = false;  // the end of a line already answered
        continue;
      }
      lines.push_back(pending_.substr(start, nl - start));
    }
    pending_.erase(0, start);
    // A command is a few words: a line this long is no command, and
    // dropping it keeps the buffer bounded.
    if (pending_.size() > kMaxLine) {
      if (!skipping_) lines.push_back(pending_.substr(0, 80) + "...");
      pending_.clear();
      skipping_ = true;
    }
    return lines;
  }

 private:
  static constexpr size_t kMaxLine = 4096;
  std::string path_;
  int fd_ = -1;
  bool created_ = false;
  bool skipping_ = false;
  std::string pending_;
};

std::string trimmed(std::string_view line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
    line.remove_suffix(1);
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  return std::string(line);
}

// Applies one control line and answers it on standard output: the answer
// is the caller's synchronisation (kbroker(1), FAULTS).
Status answer_control_line(MockCluster& cluster, const std::string& raw, Io& io) {
  std::string line = trimmed(raw);
  if (is_blank_control_line(line)) return {};
  Status applied;
  auto command = parse_fault_command(line);
  if (command) {
    applied = apply_fault(cluster, *command);
  } else {
    applied = command.take_error();
  }
  if (applied.ok()) {
    io.out.write_line("ok " + line);
    io.reporter.info(fmt::format("control: {}", line));
  } else {
    io.out.write_line(fmt::format("error: '{}': {}", line, applied.error().message));
    io.reporter.warning(fmt::format("control: '{}': {}", line, applied.error().message));
  }
  return io.out.flush();
}

}  // namespace

Status run_broker(const BrokerOptions& options, Io& io) {
  if (options.brokers < 1 || options.brokers > 16)
    return usage_error("--brokers must be from 1 to 16");
  std::vector<TopicSpec> specs;
  for (const auto& t : options.topics) {
    auto spec = parse_topic_spec(t, options.partitions);
    if (!spec) return spec.take_error();
    specs.push_back(*spec);
  }
  auto cluster = MockCluster::create(options.brokers, io.reporter);
  if (!cluster) return cluster.take_error();
  for (const auto& spec : specs) KPIPE_TRY((*cluster)->create_topic(spec.name, spec.partitions));
  // Before the bootstrap list is out: whoever reads it may signal, or write
  // to the control FIFO, at once.
  ControlChannel control;
  if (!options.control.empty()) KPIPE_TRY(control.open(options.control));
  install_outage_signals();
  std::string bootstrap = (*cluster)->bootstraps();
  io.out.write_line(bootstrap);
  KPIPE_TRY(io.out.flush());
  if (!options.bootstrap_file.empty())
    KPIPE_TRY(write_file_atomically(options.bootstrap_file, bootstrap + "\n"));
  io.reporter.warning(
      "kbroker keeps records in memory, about 5 MiB and 100000 batches per partition, and silently "
      "drops "
      "older ones: it is for demos and tests, not production");
  // Signals may land on librdkafka's threads, so the flags are polled
  // rather than waited for.
  Status served;
  while (io.stop == nullptr || !io.stop->load(std::memory_order_relaxed)) {
    struct pollfd pfd {};
    pfd.fd = control.fd();
    pfd.events = POLLIN;
    int ready = ::poll(&pfd, control.fd() >= 0 ? 1 : 0, 100);
    if (ready > 0 && (pfd.revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
      for (const auto& line : control.read_lines()) {
        served = answer_control_line(**cluster, line, io);
        if (!served.ok()) break;
      }
      if (!served.ok()) break;
    }
    int wanted = wanted_state.exchange(0, std::memory_order_relaxed);
    if (wanted == 0) continue;
    (*cluster)->set_brokers_up(wanted == 2);
    io.reporter.info(wanted == 2 ? "brokers up again (SIGUSR2)" : "brokers down (SIGUSR1)");
  }
  if (!options.bootstrap_file.empty()) ::unlink(options.bootstrap_file.c_str());
  return served;
}

}  // namespace kpipe

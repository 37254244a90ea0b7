#include "kpipe/programs/kbroker.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "kpipe/kafka/client.h"
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
  // Before the bootstrap list is out: whoever reads it may signal at once.
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
  while (io.stop == nullptr || !io.stop->load(std::memory_order_relaxed)) {
    ::poll(nullptr, 0, 100);
    int wanted = wanted_state.exchange(0, std::memory_order_relaxed);
    if (wanted == 0) continue;
    (*cluster)->set_brokers_up(wanted == 2);
    io.reporter.info(wanted == 2 ? "brokers up again (SIGUSR2)" : "brokers down (SIGUSR1)");
  }
  if (!options.bootstrap_file.empty()) ::unlink(options.bootstrap_file.c_str());
  return {};
}

}  // namespace kpipe

#include "kpipe/cli/signals.h"

#include <csignal>

namespace kpipe {

namespace {

std::atomic<bool> g_stop{false};

void on_signal(int) {
  g_stop.store(true, std::memory_order_relaxed);
}

}  // namespace

void install_signal_handlers() {
  struct sigaction sa = {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction ignore = {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  sigaction(SIGPIPE, &ignore, nullptr);
}

const std::atomic<bool>* stop_flag() {
  return &g_stop;
}
bool stop_requested() {
  return g_stop.load(std::memory_order_relaxed);
}

}  // namespace kpipe

// SIGINT and SIGTERM ask a program to stop cleanly (kpipe(7), COMMON OPTIONS): the
// handler only sets a flag, which loops check between records.
#pragma once

#include <atomic>

namespace kpipe {

// Installs the handlers (without SA_RESTART, so a blocked read returns) and
// ignores SIGPIPE, so that a closed downstream pipe is seen as EPIPE.
void install_signal_handlers();
const std::atomic<bool>* stop_flag();
bool stop_requested();
// Which signal asked to stop, 0 if none.

}  // namespace kpipe

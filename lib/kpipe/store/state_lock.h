// Who may write a state database at once (kpipe(7), CONTROL LINES AND
// CHECKPOINTS): one process per stage name, one kconsume per pipeline.
// Two stages under one name would overwrite each other's snapshots, and two
// pipelines on one file would emit the same checkpoint ids; both used to
// exit 0 and leave a state that restores wrong. A lock refuses the second
// process at start, naming the first.
//
// The locks are POSIX record locks on one byte each of FILE.lock, beside
// the database, at an offset hashed from the lock's name. A file of their
// own because closing any descriptor of a file drops all of a process's
// POSIX locks on it, and SQLite keeps its own locks on the database; record
// locks because they die with their process (SIGKILL too), so none is ever
// stale, and because the kernel tells a second process the holder's pid.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>

#include "kpipe/status.h"

namespace kpipe {

class StateLock {
 public:
  ~StateLock();
  StateLock(const StateLock&) = delete;
  StateLock& operator=(const StateLock&) = delete;

  // The lock file of the state database at `state_path`.
  static std::string lock_path(const std::string& state_path);

  // Takes the lock `name` ("stage:NAME", "kconsume") of the state database
  // at `state_path`, creating its lock file (mode 0600) if need be. When
  // another process holds it, the error is `busy("process PID")`: the
  // caller knows what to tell the user. A second take of a name this process holds is
  // refused the same way (record locks never conflict within a process).
  // `shared`: any number of processes hold it at once (a read lock), and
  // none while another holds it alone.
  using BusyMessage = std::function<std::string(const std::string& holder)>;
  static Expected<std::unique_ptr<StateLock>> take(const std::string& state_path,
                                                   const std::string& name, const BusyMessage& busy,
                                                   bool shared = false);

  // The pid of the process holding `name`, 0 when none does (or the lock
  // file does not exist). Takes nothing.
  static Expected<pid_t> holder(const std::string& state_path, const std::string& name);

 private:
  StateLock(std::string file, off_t offset) : file_(std::move(file)), offset_(offset) {}
  std::string file_;  // the lock file's identity in this process's table
  off_t offset_;
};

}  // namespace kpipe

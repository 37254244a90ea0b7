#include "kpipe/store/postgres_state_lock.h"

#include <sys/types.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kpipe/store/sql.h"

namespace kpipe {

namespace {

// How long a lock whose holder has exited may take to go (the server
// notices a closed connection at its next read, usually at once).
constexpr std::chrono::seconds kDeadHolderWait{10};

int64_t advisory_key(const std::string& name) {
  std::string keyed = "kpipe state lock:" + name;
  return static_cast<int64_t>(XXH3_64bits(keyed.data(), keyed.size()));
}

// The rows of pg_locks (as l) that hold an advisory lock on a bigint key
// of this database, which pg_locks shows as two 32-bit halves (the two
// parameters: high, low).
constexpr std::string_view kAdvisoryLockHeld =
    "l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
    "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
    "AND CAST(l.classid AS bigint) = ? AND CAST(l.objid AS bigint) = ?";

}  // namespace

Status take_postgres_state_lock(Database& db, const std::string& name, bool shared,
                                const StateLock::BusyMessage& busy) {
  return take_postgres_advisory_lock(db, advisory_key(name), shared, busy);
}

Status take_postgres_advisory_lock(Database& db, int64_t key, bool shared,
                                   const StateLock::BusyMessage& busy) {
  auto bits = static_cast<uint64_t>(key);
  auto take = db.prepare(shared ? "SELECT pg_try_advisory_lock_shared(?)"
                                : "SELECT pg_try_advisory_lock(?)");
  if (!take) return take.take_error();
  // The holder's program and pid (its application name), whether it
  // connects from where this process does, and from where.
  auto who = db.prepare(
      fmt::format("SELECT a.application_name, host(a.client_addr), "
                  "a.client_addr IS NOT DISTINCT FROM inet_client_addr() FROM pg_locks l "
                  "JOIN pg_stat_activity a ON a.pid = l.pid "
                  "WHERE (CAST(? AS integer) = 1 OR l.mode = 'ExclusiveLock') AND {}",
                  kAdvisoryLockHeld));
  if (!who) return who.take_error();
  auto deadline = std::chrono::steady_clock::now() + kDeadHolderWait;
  for (;;) {
    take->bind(1, key);
    auto row = take->step();
    if (!row) return row.take_error();
    bool taken = take->column_int(0) != 0;
    take->reset();
    if (taken) return {};
    // A shared take is refused by a holder alone only.
    who->bind(1, static_cast<int64_t>(shared ? 0 : 1))
        .bind(2, static_cast<int64_t>(bits >> 32))
        .bind(3, static_cast<int64_t>(bits & 0xffffffff));
    auto found = who->step();
    if (!found) return found.take_error();
    std::string holder = "another connection";
    bool gone = false;
    if (*found) {
      std::string app(who->column_text(0));
      size_t open = app.rfind('[');
      pid_t pid = 0;
      if (open != std::string::npos && app.ends_with("]")) {
        std::string digits = app.substr(open + 1, app.size() - open - 2);
        holder = "process " + digits;
        pid = static_cast<pid_t>(std::strtol(digits.c_str(), nullptr, 10));
      }
      if (who->column_type(1) != Statement::Type::kNull)
        holder += fmt::format(" on {}", who->column_text(1));
      // A holder on this machine that has exited (killed, say) holds the
      // lock only until the server notices its connection closed: a
      // restart right after it waits for that, instead of being refused.
      bool here = who->column_int(2) != 0;
      gone = here && pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
    }
    who->reset();
    if (!gone || std::chrono::steady_clock::now() >= deadline) return failure(busy(holder));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Expected<bool> postgres_state_lock_held(Database& db, const std::string& name) {
  auto bits = static_cast<uint64_t>(advisory_key(name));
  auto held =
      db.prepare(fmt::format("SELECT count(*) FROM pg_locks l WHERE {}", kAdvisoryLockHeld));
  if (!held) return held.take_error();
  held->bind(1, static_cast<int64_t>(bits >> 32)).bind(2, static_cast<int64_t>(bits & 0xffffffff));
  auto row = held->step();
  if (!row) return row.take_error();
  return *row && held->column_int(0) > 0;
}

void release_postgres_state_locks(Database& db) {
  (void)db.exec("SELECT pg_advisory_unlock_all()");
}

}  // namespace kpipe

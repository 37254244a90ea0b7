// The locks of state_lock.h on a state store in PostgreSQL (kpipe(7),
// CONTROL LINES AND CHECKPOINTS): session advisory locks, keyed by a hash
// of the lock's name. The server drops them when the connection goes (the
// process killed, the machine gone), so none is ever stale. The holder is
// named by its connection's application name, "PROGRAM[PID]"
// (PgConnection::connect), and the address it connects from.
#pragma once

#include <cstdint>
#include <string>

#include "kpipe/status.h"
#include "kpipe/store/state_lock.h"

namespace kpipe {

class Database;

// Takes lock `name` for this connection (`shared`: with any number of
// others that take it shared). While another holds it, fails with
// `busy(holder)`; a holder on this machine that has exited holds it only
// until the server notices, which is waited for.
Status take_postgres_state_lock(Database& db, const std::string& name, bool shared,
                                const StateLock::BusyMessage& busy);
// The same for an advisory lock known by its key alone.
Status take_postgres_advisory_lock(Database& db, int64_t key, bool shared,
                                   const StateLock::BusyMessage& busy);
// Whether any connection (this one included) holds lock `name`.
Expected<bool> postgres_state_lock_held(Database& db, const std::string& name);
// Lets go of this connection's locks: at a clean exit, at once, not when
// the server notices the connection closed.
void release_postgres_state_locks(Database& db);

}  // namespace kpipe

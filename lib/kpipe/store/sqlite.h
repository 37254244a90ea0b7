// The only door to SQLite: the Database of sql.h over an SQLite file. No
// other file includes sqlite3.h.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "kpipe/status.h"
#include "kpipe/store/sql.h"

namespace kpipe {

// An SQLite file (":memory:" for tests): WAL, synchronous=NORMAL, foreign
// keys on, and kpipe_seal defined.
Expected<std::unique_ptr<Database>> open_sqlite(const std::string& path, OpenOptions options);

// Makes `fn` the SQL function NAME(x) on an SQLite connection:
// deterministic, given the bytes of a text or blob, an integer back (NULL
// for NULL). For values that SQL cannot compute, such as a hash, that a
// migration must fill in for the rows already there.
using BytesFunction = int64_t (*)(std::string_view bytes);
Status define_sqlite_function(Database& db, const std::string& name, BytesFunction fn);

}  // namespace kpipe

// A database table read as rows of JSON (kjoin(1), --table sqlite:FILE:TABLE
// and postgresql://...#TABLE): the store layer's part of kjoin, since only
// store/ may speak to a database.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kpipe/status.h"

namespace kpipe {

// Calls `each` with every row of `table` ("name" or "schema.name") in the
// database at `target` (an SQLite file, opened read-only, or a PostgreSQL
// target), as one JSON object of its columns in order, each value as
// kjoin(1) tells (Tables, "column type -> JSON value"): integers and
// PostgreSQL's numeric as numbers written digit for digit, floats as
// numbers (null when not finite), booleans as true and false, blobs as
// base64 strings, text and every other type as strings, NULL as null.
// `columns` is called once, before the first row (also when there is
// none), with the table's column names, so that the caller can refuse a
// column it needs that is not there. A table that is not there is a
// usage error naming the tables the database has (kjoin(1), Tables: the
// user named something that is not there). Stops at the first error
// `columns` or `each` returns.
Status read_table_rows(const std::string& target, const std::string& table,
                       const std::function<Status(const std::vector<std::string>& names)>& columns,
                       const std::function<Status(std::string_view row)>& each);

}  // namespace kpipe

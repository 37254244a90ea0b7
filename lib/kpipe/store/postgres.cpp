#include "kpipe/store/postgres.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include <libpq-fe.h>

namespace kpipe {

namespace {

constexpr std::string_view kSchemes[] = {"postgresql://", "postgres://"};
constexpr std::string_view kPrefixes[] = {"postgresql:", "postgres:"};

bool is_uri(std::string_view target) {
  return std::any_of(std::begin(kSchemes), std::end(kSchemes),
                     [&](std::string_view s) { return target.starts_with(s); });
}

// What libpq reads as its dbname: a URI whole, a conninfo without the
// "postgresql:" that marks it as one.
std::string conninfo_of(std::string_view target) {
  if (is_uri(target)) return std::string(target);
  for (std::string_view p : kPrefixes)
    if (target.starts_with(p)) return std::string(target.substr(p.size()));
  return std::string(target);
}

// libpq's messages span lines ("...failed: Connection refused\n\tIs the
// server running..."): one line, as every kpipe diagnostic.
std::string one_line(std::string_view message) {
  std::string out;
  bool space = false;
  for (char c : message) {
    if (c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out.append(out.back() == ':' || out.back() == '.' ? " " : "; ");
    space = false;
    out.push_back(c);
  }
  return out;
}

std::string redact_uri(std::string_view target) {
  size_t start = target.find("://") + 3;
  size_t end = target.find_first_of("/?#", start);
  if (end == std::string_view::npos) end = target.size();
  std::string_view authority = target.substr(start, end - start);
  std::string out(target.substr(0, start));
  size_t at = authority.rfind('@');
  if (at != std::string_view::npos) {
    std::string_view user = authority.substr(0, at);
    out.append(user.substr(0, user.find(':')));
    out.append(authority.substr(at));
  } else {
    out.append(authority);
  }
  std::string_view rest = target.substr(end);
  size_t q = rest.find('?');
  out.append(rest.substr(0, q));
  if (q == std::string_view::npos) return out;
  // Query parameters, password=... left out.
  std::string_view params = rest.substr(q + 1);
  char sep = '?';
  while (!params.empty()) {
    size_t amp = params.find('&');
    std::string_view p = params.substr(0, amp);
    if (!p.starts_with("password=") && !p.empty()) {
      out.push_back(sep);
      out.append(p);
      sep = '&';
    }
    if (amp == std::string_view::npos) break;
    params = params.substr(amp + 1);
  }
  return out;
}

std::string redact_conninfo(std::string_view target) {
  std::string conninfo = conninfo_of(target);
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "postgresql:(a conninfo libpq cannot read)";
  }
  std::string out = "postgresql:";
  bool first = true;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr || std::strcmp(o->keyword, "password") == 0) continue;
    if (!first) out.push_back(' ');
    first = false;
    out.append(o->keyword).push_back('=');
    std::string_view v = o->val;
    bool quote = v.empty() || v.find_first_of(" '\\") != std::string_view::npos;
    if (quote) out.push_back('\'');
    for (char c : v) {
      if (c == '\'' || c == '\\') out.push_back('\\');
      out.push_back(c);
    }
    if (quote) out.push_back('\'');
  }
  PQconninfoFree(options);
  return out;
}

}  // namespace

bool is_postgres_target(std::string_view target) {
  return std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                     [&](std::string_view p) { return target.starts_with(p); });
}

std::string redact_postgres_target(std::string_view target) {
  return is_uri(target) ? redact_uri(target) : redact_conninfo(target);
}

void append_copy_text(std::string& out, std::string_view value) {
  for (char c : value) {
    switch (c) {
      case '\\':
        out.append("\\\\");
        break;
      case '\t':
        out.append("\\t");
        break;
      case '\n':
        out.append("\\n");
        break;
      case '\r':
        out.append("\\r");
        break;
      default:
        out.push_back(c);
    }
  }
}

// --- results -------------------------------------------------------------------

PgResult::~PgResult() {
  if (r_ != nullptr) PQclear(r_);
}

PgResult& PgResult::operator=(PgResult&& other) noexcept {
  if (this != &other) {
    if (r_ != nullptr) PQclear(r_);
    r_ = other.r_;
    other.r_ = nullptr;
  }
  return *this;
}

int PgResult::rows() const {
  return r_ == nullptr ? 0 : PQntuples(r_);
}
int PgResult::columns() const {
  return r_ == nullptr ? 0 : PQnfields(r_);
}
bool PgResult::is_null(int row, int column) const {
  return PQgetisnull(r_, row, column) != 0;
}
std::string_view PgResult::text(int row, int column) const {
  return {PQgetvalue(r_, row, column), static_cast<size_t>(PQgetlength(r_, row, column))};
}
int64_t PgResult::integer(int row, int column) const {
  return std::strtoll(PQgetvalue(r_, row, column), nullptr, 10);
}
std::string_view PgResult::command() const {
  return r_ == nullptr ? "" : PQcmdStatus(r_);
}
int64_t PgResult::affected() const {
  const char* n = r_ == nullptr ? "" : PQcmdTuples(r_);
  return *n == '\0' ? 0 : std::strtoll(n, nullptr, 10);
}

// --- the connection ------------------------------------------------------------

PgConnection::PgConnection(pg_conn* conn, std::string display)
    : conn_(conn), display_(std::move(display)) {}

PgConnection::~PgConnection() {
  PQfinish(conn_);
}

Expected<std::unique_ptr<PgConnection>> PgConnection::connect(const std::string& target,
                                                              const std::string& application) {
  std::string dbname = conninfo_of(target);
  std::string display = redact_postgres_target(target);
  // With expand_dbname, what the target says overrides the keywords before
  // it, and the keywords after it override the target.
  std::vector<const char*> keys, values;
  if (std::getenv("PGCONNECT_TIMEOUT") == nullptr) {
    keys.push_back("connect_timeout");
    values.push_back("10");
  }
  keys.insert(keys.end(), {"fallback_application_name", "dbname", "client_encoding", nullptr});
  values.insert(values.end(), {application.c_str(), dbname.c_str(), "UTF8", nullptr});
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), 1);
  if (conn == nullptr) return failure("{}: cannot connect: out of memory", display);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = one_line(PQerrorMessage(conn));
    PQfinish(conn);
    return failure("{}: cannot connect: {}", display, why);
  }
  // Notices (a name truncated, a table that already exists) are the
  // server's chatter, not the program's diagnostics.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  return std::unique_ptr<PgConnection>(new PgConnection(conn, std::move(display)));
}

bool PgConnection::broken() const {
  return PQstatus(conn_) != CONNECTION_OK;
}

bool PgConnection::refused_values() const {
  return sqlstate_.starts_with("22") || sqlstate_.starts_with("23");
}

Expected<PgResult> PgConnection::outcome(pg_result* r, std::string_view what) {
  PgResult result(r);
  ExecStatusType status = r == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(r);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_COPY_IN)
    return result;
  const char* state = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_SQLSTATE);
  const char* primary = r == nullptr ? nullptr : PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY);
  sqlstate_ = state != nullptr ? state : "";
  reason_ = one_line(primary != nullptr ? primary : PQerrorMessage(conn_));
  if (broken()) return failure("{}: lost the connection ({}): {}", display_, what, reason_);
  return failure("{}: {}: {}", display_, what, reason_);
}

Status PgConnection::exec(std::string_view sql) {
  std::string text(sql);
  auto r = outcome(PQexec(conn_, text.c_str()), "statement failed");
  if (!r) return r.take_error();
  return {};
}

Expected<PgResult> PgConnection::query(std::string_view sql, const std::vector<PgParam>& params) {
  std::string text(sql);
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  return outcome(PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr,
                              values.data(), nullptr, nullptr, 0),
                 "query failed");
}

Status PgConnection::copy_in(std::string_view copy_sql, std::string_view data) {
  std::string text(copy_sql);
  auto started = outcome(PQexec(conn_, text.c_str()), "COPY failed");
  if (!started) return started.take_error();
  constexpr size_t kChunk = 1 << 20;
  for (size_t at = 0; at < data.size(); at += kChunk) {
    size_t n = std::min(kChunk, data.size() - at);
    if (PQputCopyData(conn_, data.data() + at, static_cast<int>(n)) != 1) break;
  }
  PQputCopyEnd(conn_, nullptr);
  // The COPY's outcome, then nothing: every result is read, so that the
  // connection is ready for the next query.
  Status status;
  while (PGresult* r = PQgetResult(conn_)) {
    auto done = outcome(r, "COPY failed");
    if (!done && status.ok()) status = done.take_error();
  }
  if (status.ok() && broken())
    return failure("{}: lost the connection (COPY failed): {}", display_,
                   one_line(PQerrorMessage(conn_)));
  return status;
}

// --- transactions ----------------------------------------------------------------

Expected<PgTransaction> PgTransaction::begin(PgConnection& conn) {
  KPIPE_TRY(conn.exec("BEGIN"));
  return PgTransaction(&conn);
}

PgTransaction::~PgTransaction() {
  if (conn_ != nullptr && !conn_->broken()) (void)conn_->exec("ROLLBACK");
}

Status PgTransaction::commit() {
  PgConnection* conn = conn_;
  conn_ = nullptr;
  auto r = conn->query("COMMIT");
  if (!r) return r.take_error();
  // COMMIT of a transaction a failed statement aborted answers ROLLBACK.
  if (r->command() == "ROLLBACK")
    return failure("{}: the transaction was rolled back, not committed", conn->display());
  return {};
}

}  // namespace kpipe

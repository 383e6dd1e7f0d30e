#include "history/sqlite.hpp"

#include <cstring>

namespace runner::history {

SqliteError::SqliteError(sqlite3* db, const std::string& what)
    : std::runtime_error(what + ": " + sqlite3_errmsg(db) + " (" +
                         (sqlite3_db_filename(db, "main") ? sqlite3_db_filename(db, "main") : "?") + ")") {}

Statement::Statement(sqlite3* db, const char* sql) : db_(db) {
  if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) throw SqliteError(db, "preparing SQL");
}

Statement& Statement::bind(int i, const std::string& s) {
  sqlite3_bind_text(stmt_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind(int i, std::int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Statement& Statement::bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Statement& Statement::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}
Statement& Statement::bind_blob(int i, const std::vector<double>& v) {
  if (v.empty()) return bind_null(i);
  sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size() * sizeof(double)), SQLITE_TRANSIENT);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  throw SqliteError(db_, "executing SQL");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int col) const {
  const auto* p = sqlite3_column_text(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), sqlite3_column_bytes(stmt_, col)) : std::string();
}

std::vector<double> Statement::blob_doubles(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  const int bytes = sqlite3_column_bytes(stmt_, col);
  std::vector<double> out(p ? static_cast<size_t>(bytes) / sizeof(double) : 0);
  if (!out.empty()) std::memcpy(out.data(), p, out.size() * sizeof(double));
  return out;
}

Transaction::Transaction(sqlite3* db) : db_(db) {
  // Inside another transaction: part of it (it commits or rolls back the whole).
  if (!sqlite3_get_autocommit(db)) {
    done_ = true;
    return;
  }
  if (sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) != SQLITE_OK)
    throw SqliteError(db, "starting a write transaction");
}

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  if (done_) return;
  if (sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr) != SQLITE_OK) throw SqliteError(db_, "committing");
  done_ = true;
}

}  // namespace runner::history

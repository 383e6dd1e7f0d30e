// A thin RAII layer over the SQLite C API: prepared statements with typed binds
// and column reads, and errors as exceptions naming the database file.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace runner::history {

class Statement {
 public:
  Statement(sqlite3* db, const char* sql);
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, const std::string& s);
  Statement& bind(int i, std::int64_t v);
  Statement& bind(int i, double v);
  Statement& bind_null(int i);
  Statement& bind_blob(int i, const std::vector<double>& v);
  bool step();  // true while a row is available
  void reset();

  std::int64_t int64(int col) const { return sqlite3_column_int64(stmt_, col); }
  double real(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string text(int col) const;
  std::vector<double> blob_doubles(int col) const;
  bool is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

class SqliteError : public std::runtime_error {
 public:
  SqliteError(sqlite3* db, const std::string& what);
};

// BEGIN IMMEDIATE ... COMMIT; rolls back when destroyed before commit(). Inside an
// open transaction it does nothing: the outer one commits or rolls back the whole.
class Transaction {
 public:
  explicit Transaction(sqlite3* db);
  ~Transaction();
  void commit();

 private:
  sqlite3* db_;
  bool done_ = false;
};

}  // namespace runner::history

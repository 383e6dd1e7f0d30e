// results.jsonl: one JSON object per record; a point's records are appended in one
// write, each marked "point_record": [i, n], so a crash mid-sweep keeps every
// finished point and readers skip a point cut off while being written.
#pragma once
#include <filesystem>
#include <vector>

#include "runner/stored_record.hpp"

namespace runner {

class ResultsWriter {
 public:
  explicit ResultsWriter(const std::filesystem::path& file);
  ~ResultsWriter();
  ResultsWriter(const ResultsWriter&) = delete;
  ResultsWriter& operator=(const ResultsWriter&) = delete;
  // One point's records, each marked with its point_record, in one write; text that
  // is not UTF-8 is replaced by U+FFFD, never lost. A failed write (disk full) is
  // cut back off the file, so no part of the point stays, and throws.
  void append_point(std::vector<StoredRecord> records);

 private:
  int fd_ = -1;
  std::filesystem::path file_;
};

// `records` marked as one point's, each with its point_record [i, n].
void mark_point_records(std::vector<StoredRecord>& records);

}  // namespace runner

#include "output/results_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace runner {

ResultsWriter::ResultsWriter(const std::filesystem::path& file) : file_(file) {
  fd_ = ::open(file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd_ < 0) throw std::runtime_error("cannot open " + file.string() + " for writing: " + std::strerror(errno));
}

ResultsWriter::~ResultsWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void mark_point_records(std::vector<StoredRecord>& records) {
  const auto n = static_cast<std::int64_t>(records.size());
  for (std::int64_t i = 0; i < n; ++i) records[static_cast<size_t>(i)].point_record.emplace(i + 1, n);
}

void ResultsWriter::append_point(std::vector<StoredRecord> records) {
  mark_point_records(records);
  std::string text;
  for (const StoredRecord& r : records) text += record_line(r) + '\n';
  struct stat before {};
  const bool sized = ::fstat(fd_, &before) == 0;
  const char* at = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, at, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = n < 0 ? std::strerror(errno) : "nothing written";
      // Only this process appends (the run directory is locked): what it wrote of
      // the point is cut off again. Should that fail too, the point is torn, which
      // every reader skips.
      if (sized) {
        [[maybe_unused]] const int cut = ::ftruncate(fd_, before.st_size);
      }
      throw std::runtime_error("writing " + file_.string() + " failed (" + why + "; disk full?)");
    }
    at += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace runner

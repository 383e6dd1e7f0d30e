// The results.jsonl codec: every committed record reads back and writes out as the
// same line; statuses, metrics and unknown keys survive; the reader names file:line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>

#include "runner/stored_record.hpp"

namespace runner {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kSource = RUNNER_SOURCE_DIR;

fs::path write_lines(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("stored-record-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << text;
  return dir / name;
}

std::string error_of(const fs::path& file, RecordTypes types) {
  try {
    read_records(file, types);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(StoredRecord, EveryCommittedRecordWritesBackAsTheSameLine) {
  std::size_t lines = 0;
  for (const auto& entry : fs::recursive_directory_iterator(kSource / "reports")) {
    if (entry.path().filename() != "results.jsonl") continue;
    std::ifstream in(entry.path());
    int line_no = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_no;
      if (line.empty()) continue;
      const json original = parse_record_line(line);
      const json again = encode_record(decode_record(original));
      ASSERT_EQ(again.dump(), original.dump()) << entry.path() << ":" << line_no;
      ++lines;
    }
  }
  EXPECT_GT(lines, 1000u);  // the committed reports' records, not an empty walk
}

TEST(StoredRecord, AFreshRecordStoresStatsWithTheirNoiseAndRefusesTwoMetricsOfOneName) {
  Record record;
  record.label("tensor", "fc1").add("step", Stats::of({1.0, 2.0, 3.0}), "ms").add("flops", 4e9, "FLOP");
  record.add_text("kernel", "gemm").add("once", Stats::of({5.0}), "ms");
  record.artifacts = {"trace.json"};
  StoredRecord stored = stored_record(record);
  stored.experiment = "e";
  stored.part = "main";
  stored.point = 3;
  stored.task = "echo";
  const json j = encode_record(stored);
  EXPECT_EQ(j["labels"], json({{"tensor", "fc1"}}));
  EXPECT_EQ(j["metrics"]["step"]["n"], 3);
  EXPECT_DOUBLE_EQ(j["metrics"]["step"]["rel_stderr"].get<double>(), Stats::of({1.0, 2.0, 3.0}).rel_stderr());
  EXPECT_FALSE(j["metrics"]["once"].contains("rel_stderr"));  // one sample says nothing about noise
  EXPECT_EQ(j["metrics"]["flops"], json({{"unit", "FLOP"}, {"value", 4e9}}));
  EXPECT_EQ(j["metrics"]["kernel"], json({{"text", "gemm"}}));
  EXPECT_EQ(j["artifacts"], json::array({"trace.json"}));
  EXPECT_EQ(j["point"], 3);
  EXPECT_EQ(j["status"], "ok");

  const StoredRecord back = decode_record(j);
  ASSERT_EQ(back.metrics.size(), 4u);
  const auto* step = std::get_if<Stats>(&back.metric("step")->value);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->n, 3);
  EXPECT_DOUBLE_EQ(step->median, 2.0);
  EXPECT_EQ(back.metric("step")->unit, "ms");
  EXPECT_EQ(std::get<std::string>(back.metric("kernel")->value), "gemm");
  EXPECT_DOUBLE_EQ(*back.rel_stderr("step"), Stats::of({1.0, 2.0, 3.0}).rel_stderr());
  EXPECT_FALSE(back.rel_stderr("once").has_value());
  EXPECT_FALSE(back.rel_stderr("flops").has_value());

  Record twice;
  twice.metrics = {{"t", Metric{"ms", 1.0}}, {"t", Metric{"ms", 2.0}}};
  EXPECT_THROW(stored_record(twice), std::invalid_argument);
}

TEST(StoredRecord, StatusesAndMessagesReadAsTheyWereWritten) {
  for (RecordStatus status : {RecordStatus::ok, RecordStatus::error, RecordStatus::oom, RecordStatus::skipped,
                              RecordStatus::interrupted}) {
    StoredRecord r;
    r.status = status;
    r.message = status == RecordStatus::ok ? "" : "why";
    const json j = encode_record(r);
    EXPECT_EQ(j["status"], status_name(status));
    if (status == RecordStatus::skipped) EXPECT_EQ(j["reason"], "why");
    else if (status != RecordStatus::ok) EXPECT_EQ(j["error"], "why");
    const StoredRecord back = decode_record(j);
    EXPECT_EQ(back.status, status);
    EXPECT_EQ(back.message, r.message);
    EXPECT_EQ(back.failed(), status != RecordStatus::ok);
  }
  const StoredRecord foreign = decode_record({{"status", "exploded"}});
  EXPECT_EQ(foreign.status, RecordStatus::other);
  EXPECT_EQ(foreign.status_text(), "exploded");
  EXPECT_EQ(encode_record(foreign)["status"], "exploded");
  EXPECT_EQ(decode_record(json::object()).status, RecordStatus::ok);  // written before statuses existed
}

TEST(StoredRecord, KeysTheCodecDoesNotModelAreKept) {
  const json line = {{"experiment", "e"}, {"part", "p"}, {"point", 0}, {"task", "t"}, {"status", "ok"},
                     {"params", {{"n", 4}}}, {"labels", json::object()}, {"artifacts", json::array()},
                     {"metrics", {{"t", {{"unit", "ms"}, {"n", 2}, {"mean", 1.0}, {"std", 0.5}, {"median", 1.0},
                                         {"min", 0.5}, {"max", 1.5}, {"samples", {0.5, 1.5}}, {"new_field", "x"}}}}},
                     {"measurement", {{"target_rel_stderr", 0.02}}}, {"gpu", {{"clock", 1980}}}, {"source_run", 1},
                     {"env", {{"device", "cpu"}}}, {"time", "2026-11-25T00:00:00Z"}};
  const StoredRecord r = decode_record(line);
  EXPECT_EQ(r.observed["measurement"]["target_rel_stderr"], 0.02);
  EXPECT_EQ(r.observed["source_run"], 1);
  EXPECT_EQ(r.metric_extra.at("t")["samples"], json({0.5, 1.5}));
  EXPECT_EQ(encode_record(r), line);
  EXPECT_EQ(*r.label_or_param("n"), 4);
  EXPECT_EQ(r.label_or_param("missing"), nullptr);
  EXPECT_EQ(*r.label_or_param("env.device"), "cpu");  // the environment, by its prefix only
  EXPECT_EQ(r.label_or_param("device"), nullptr);
  EXPECT_EQ(r.label_or_param("env.missing"), nullptr);
  EXPECT_EQ(r.label_or_param("env."), nullptr);
}

// JSON has no NaN: nlohmann wrote it as null, which reads as "never measured". A
// non-finite number is written as the text NaN, Infinity or -Infinity and reads back
// as that number; null (files written before) still reads as NaN.
TEST(StoredRecord, NullReadsAsNaNAndNonFiniteNumbersWriteAsText) {
  const json line = {{"metrics", {{"a", {{"unit", "ms"}, {"value", nullptr}}},
                                  {"b", {{"unit", "ms"}, {"n", 1}, {"mean", nullptr}, {"std", nullptr},
                                         {"median", 1.0}, {"min", "-Infinity"}, {"max", "Infinity"}}}}}};
  EXPECT_EQ(check_record_types(line), "");
  const StoredRecord r = decode_record(line);
  EXPECT_TRUE(std::isnan(std::get<double>(r.metric("a")->value)));
  EXPECT_TRUE(std::isnan(std::get<Stats>(r.metric("b")->value).std));
  EXPECT_EQ(std::get<Stats>(r.metric("b")->value).min, -std::numeric_limits<double>::infinity());
  EXPECT_EQ(std::get<Stats>(r.metric("b")->value).max, std::numeric_limits<double>::infinity());
  const json again = json::parse(encode_record(r).dump());
  EXPECT_EQ(again["metrics"]["a"]["value"], "NaN");
  EXPECT_EQ(again["metrics"]["b"]["mean"], "NaN");
  EXPECT_EQ(again["metrics"]["b"]["min"], "-Infinity");
  EXPECT_EQ(again["metrics"]["b"]["max"], "Infinity");
  EXPECT_EQ(check_record_types({{"metrics", {{"a", {{"value", "many"}}}}}}),
            "metrics.a.value is text, expected a number");
}

TEST(StoredRecord, FieldsOfTheWrongTypeReadAsTextWhenLenient) {
  const fs::path file = kSource / "tests" / "hostile" / "records" / "wrong_types.jsonl";
  const auto records = read_records(file, RecordTypes::lenient);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].experiment, "7");
  EXPECT_EQ(records[0].part, "[\"main\"]");
  EXPECT_EQ(records[0].status, RecordStatus::other);
  EXPECT_EQ(records[0].status_text(), "3");
  EXPECT_EQ(records[0].message, "{\"a\":1}");
  EXPECT_FALSE(records[0].point.has_value());
  EXPECT_TRUE(records[0].params.empty());
  EXPECT_EQ(error_of(file, RecordTypes::checked),
            file.string() + ":1: experiment is an integer, expected text (not a record the runner writes)");
}

TEST(StoredRecord, TheReaderNamesFileAndLine) {
  const std::string good = R"({"experiment":"e","status":"ok"})";
  const auto middle = write_lines("middle.jsonl", good + "\n{\"experiment\":\n" + good + "\n");
  EXPECT_NE(error_of(middle, RecordTypes::lenient).find(middle.string() + ":2: malformed JSON"), std::string::npos);
  const auto list = write_lines("list.jsonl", good + "\n\n[1, 2]\n");
  EXPECT_EQ(error_of(list, RecordTypes::checked), list.string() + ":3: expected one JSON object per line");
  const auto deep = kSource / "tests" / "hostile" / "records" / "deep_params.jsonl";
  EXPECT_EQ(error_of(deep, RecordTypes::lenient),
            deep.string() + ":1: nested more than 64 levels deep (not a record the runner writes)");
  // nlohmann's out_of_range for a number past double's range reaches callers as runtime_error.
  EXPECT_THROW(parse_record_line(R"({"x": 1e6875})"), std::runtime_error);
  const auto overflow = write_lines("overflow.jsonl", good + "\n" R"({"x": 1e6875})" "\n" + good + "\n");
  EXPECT_EQ(error_of(overflow, RecordTypes::lenient).rfind(overflow.string() + ":2: unreadable JSON: ", 0), 0u);
  const auto metric = write_lines("metric.jsonl", R"({"metrics":{"t":{"n":"many"}}})" "\n");
  EXPECT_EQ(error_of(metric, RecordTypes::checked),
            metric.string() + ":1: metrics.t.n is text, expected an integer (not a record the runner writes)");
  EXPECT_EQ(error_of(metric, RecordTypes::lenient), "(no error)");
  EXPECT_EQ(error_of(kSource / "no-such-file.jsonl", RecordTypes::lenient),
            (kSource / "no-such-file.jsonl").string() + ": cannot open");

  // A kill mid-write cuts only the last record: skipped with a warning, blank tail and all.
  const auto torn = write_lines("torn.jsonl", good + "\n" + good + "\n{\"experi\n\n");
  std::vector<std::string> warnings;
  EXPECT_EQ(read_records(torn, RecordTypes::checked, &warnings).size(), 2u);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], torn.string() + ":3: skipped a truncated last record (the run was killed while writing it)");
}

// A point is written in one append, each record marked [i, n]: a point missing
// any of its records (a kill or a full disk mid-write) is not read, wherever it
// sits; records written before the marker existed are read as they are.
TEST(StoredRecord, APointMissingSomeOfItsRecordsIsNotRead) {
  const auto rec = [](int point, int i, int n) {
    return R"({"experiment":"e","part":"main","point":)" + std::to_string(point) + R"(,"status":"ok","point_record":[)" +
           std::to_string(i) + "," + std::to_string(n) + "]}\n";
  };
  const std::string legacy = R"({"experiment":"e","part":"main","point":9,"status":"ok"})" "\n";
  const std::string whole = rec(0, 1, 2) + rec(0, 2, 2);
  // Point 1 lost its last record (disk full), point 2 its first (a hand-cut file),
  // point 3 was cut after 2 of 3 records at the end (kill -9).
  const std::string text = legacy + whole + rec(1, 1, 2) + rec(2, 2, 2) + rec(4, 1, 1) + rec(3, 1, 3) + rec(3, 2, 3);
  const auto file = write_lines("torn-points.jsonl", text);
  std::vector<std::string> warnings;
  const auto records = read_records(file, RecordTypes::checked, &warnings);
  std::vector<std::int64_t> points;
  for (const auto& r : records) points.push_back(*r.point);
  EXPECT_EQ(points, (std::vector<std::int64_t>{9, 0, 0, 4}));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_EQ(warnings[0], file.string() + ":4: skipped point main[1]: 1 of its 2 records (the run stopped while "
                                         "writing it; --resume runs it again)");
  EXPECT_NE(warnings[1].find(":5: skipped point main[2]: 1 of its 2 records"), std::string::npos);
  EXPECT_NE(warnings[2].find(":7: skipped point main[3]: 2 of its 3 records"), std::string::npos);
  // --resume keeps the file up to the end of point 4, the last whole one.
  EXPECT_EQ(whole_points_length(file), text.size() - rec(3, 1, 3).size() - rec(3, 2, 3).size());
  // A point whose last line lost its newline was cut mid-write too.
  const std::string unterminated = whole + rec(5, 1, 1);
  const auto cut = write_lines("cut-newline.jsonl", unterminated.substr(0, unterminated.size() - 1));
  EXPECT_EQ(whole_points_length(cut), whole.size());
  // The marker survives decode and encode, so a copied record keeps it.
  const json line = json::parse(rec(0, 2, 2));
  EXPECT_EQ(encode_record(decode_record(line))["point_record"], json::array({2, 2}));
}

}  // namespace
}  // namespace runner

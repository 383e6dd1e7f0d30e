"""runner_records.read_records against the runner's rules: torn and partial writes do not
count, a re-written point keeps its last write, old files without point_record read as is."""
import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner_records import parse_records, read_records  # noqa: E402


def rec(part, point, i=None, n=None, value=0):
    r = {"part": part, "point": point, "status": "ok", "metrics": {"v": {"value": value}}}
    if i is not None:
        r["point_record"] = [i, n]
    return json.dumps(r)


class ReadRecords(unittest.TestCase):
    def read(self, lines):
        with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
            f.write("\n".join(lines) + "\n")
        try:
            return read_records(f.name)
        finally:
            os.unlink(f.name)

    def test_whole_points_count_and_a_torn_last_line_does_not(self):
        rows = self.read([rec("a", 0, 1, 2), rec("a", 0, 2, 2), rec("a", 1, 1, 2), '{"part": "a", "poi'])
        self.assertEqual([(r["part"], r["point"]) for r in rows], [("a", 0), ("a", 0)])

    def test_a_point_written_again_keeps_its_last_write(self):
        rows = self.read([rec("a", 0, 1, 1, value=1), rec("b", 0, 1, 1), rec("a", 0, 1, 1, value=2)])
        self.assertEqual([(r["part"], r["metrics"]["v"]["value"]) for r in rows], [("a", 2), ("b", 0)])

    def test_a_gap_drops_the_write(self):
        rows = self.read([rec("a", 0, 1, 3), rec("a", 0, 3, 3), rec("b", 0, 1, 1)])
        self.assertEqual([r["part"] for r in rows], ["b"])

    def test_files_without_point_record_read_line_by_line(self):
        rows = self.read([rec("a", 0), "", rec("a", 0)])
        self.assertEqual(len(rows), 2)

    def test_lines_in_memory_read_as_the_file_would(self):
        lines = [rec("a", 0, 1, 1, value=1), rec("a", 0, 1, 1, value=2), '{"part": "b", "poi', "[1, 2]"]
        self.assertEqual(parse_records(lines), self.read(lines))
        self.assertEqual([r["metrics"]["v"]["value"] for r in parse_records(lines)], [2])


if __name__ == "__main__":
    unittest.main()

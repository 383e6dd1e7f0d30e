"""Read a run's results.jsonl the way the runner does (runner/stored_record.hpp), for the
analysis scripts: blank lines and a torn last line are skipped; a point's records count only
when all n records of its write are there (`point_record: [i, n]`); a point written again
(a resumed run re-running it) keeps its last whole write. Files from before `point_record`
read line by line; a line that is not a JSON object counts as torn; a path ending in .gz is read
through gzip.

    from runner_records import read_records
    for record in read_records("runs/x/results.jsonl"): ...

parse_records(lines) applies the same rules to lines already in memory (a file at an old
commit, read through `git show`).
"""
import gzip
import json


def read_records(path):
    """The records of one results.jsonl, in file order of their points."""
    opened = gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz") else open(path, encoding="utf-8")
    with opened as f:
        return parse_records(f)


def parse_records(lines):
    """The records of results.jsonl lines (any iterable of text lines), in order of their points."""
    slots, where = [], {}  # slots: lists of records; where: (part, point) -> slot index
    pending = []           # the write being read: records [1..i] of n
    for line in lines:
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            record = None
        if not isinstance(record, dict):
            pending = []  # a torn write (or a line that is no record): none of it counts
            continue
        mark = record.get("point_record")
        if not (isinstance(mark, list) and len(mark) == 2):
            slots.append([record])
            continue
        i, n = mark
        if i == 1:
            pending = []
        if i != len(pending) + 1:  # a gap: the write it belonged to was cut
            pending = []
            continue
        pending.append(record)
        if i == n:
            key = (record.get("part"), record.get("point"))
            if key in where:
                slots[where[key]] = pending
            else:
                where[key] = len(slots)
                slots.append(pending)
            pending = []
    return [record for slot in slots for record in slot]

"""Read a run's results.jsonl the way the runner does (runner/stored_record.hpp), for the
analysis scripts: blank lines and a torn last line are skipped; a point's records count only
when all n records of its write are there (`point_record: [i, n]`); a point written again
(a resumed run re-running it) keeps its last whole write. Files from before `point_record`
read line by line; a path ending in .gz is read through gzip.

    from runner_records import read_records
    for record in read_records("runs/x/results.jsonl"): ...
"""
import gzip
import json


def read_records(path):
    """The records of one results.jsonl, in file order of their points."""
    slots, where = [], {}  # slots: lists of records; where: (part, point) -> slot index
    pending = []           # the write being read: records [1..i] of n
    opened = gzip.open(path, "rt", encoding="utf-8") if str(path).endswith(".gz") else open(path, encoding="utf-8")
    with opened as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                pending = []  # a torn write: none of it counts
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

#!/usr/bin/env python3
"""Merge a re-run of some parts of an experiment into a full run's records: the full run's
records of every other part, in its order, then the re-run's records of those parts.

  replace_parts.py FULL_RUN RERUN OUT_DIR PART [PART ...]

FULL_RUN and RERUN are runner --out directories of the same experiment (results.jsonl,
log.txt); OUT_DIR (e.g. reports/<id>/data) gets results.jsonl and log.txt (both runs' logs,
the re-run's after). Its config.yaml is written by the caller (runner --cfg of the experiment
as committed, with a note saying which parts ran in which call). Fails when the re-run has no
record of a named part, or records of a part not named.
"""
import json
import pathlib
import sys


def records(run):
    return [json.loads(line) for line in open(run / "results.jsonl") if line.strip()]


def main(argv):
    if len(argv) < 5:
        sys.exit(__doc__)
    full, rerun, out = map(pathlib.Path, argv[1:4])
    parts = set(argv[4:])
    new = records(rerun)
    seen = {r["part"] for r in new}
    if seen - parts or parts - seen:
        sys.exit(f"replace_parts: the re-run has parts {sorted(seen)}, asked to replace {sorted(parts)}")
    kept = [r for r in records(full) if r["part"] not in parts]
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w") as f:
        for r in kept + new:
            f.write(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n")
    logs = [(full / "log.txt").read_text(), (rerun / "log.txt").read_text()]
    (out / "log.txt").write_text(logs[0] + f"# re-run of parts {', '.join(sorted(parts))}:\n" + logs[1])
    print(f"{len(kept)} records kept, {len(new)} replaced from {rerun}")


if __name__ == "__main__":
    main(sys.argv)

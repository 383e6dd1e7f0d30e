"""Test double for task/external_python: echoes its flags as a record, or misbehaves on request."""
import argparse
import json
import sys

parser = argparse.ArgumentParser()
for flag in ("--device", "--precision", "--seed", "--warmup", "--steps", "--model", "--model.size",
             "--target-rel-stderr", "--min-steps", "--max-steps", "--max-seconds", "--repetitions", "--cache"):
    parser.add_argument(flag)
parser.add_argument("--behave", default="ok", choices=["ok", "fail", "oom", "silent"])
args, _ = parser.parse_known_args()

print("a progress line that is not a record")
if args.behave == "fail":
    print("Traceback: something broke", file=sys.stderr)
    sys.exit(3)
if args.behave == "oom":
    print(json.dumps({"oom": True, "error": "CUDA out of memory. Tried to allocate 2.00 GiB"}))
    sys.exit(0)
if args.behave == "silent":
    sys.exit(0)
flags = vars(args)
line = {
    "labels": {"impl": "pytorch", "size": flags["model.size"]},
    "metrics": {
        "step_ms": {"unit": "ms", "samples": [1.0, 2.0, 3.0]},
        "peak_memory_bytes": {"unit": "bytes", "value": 1024},
        "flags": {"text": " ".join(f"{k}={v}" for k, v in sorted(flags.items()))},
    },
}
if args.target_rel_stderr:  # adaptive: say how the (pretend) loop stopped
    line["metrics"]["step_ms"]["repetition_means"] = [1.5, 2.5]
    line["measurement"] = {"mode": "adaptive", "n": 3, "rel_stderr": 0.019, "target_rel_stderr": float(args.target_rel_stderr),
                           "target_met": True, "stop_reason": "target", "repetitions": int(args.repetitions)}
print(json.dumps(line))

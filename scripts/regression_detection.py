#!/usr/bin/env python3
"""Measures compare's detector and renders the README table from the measurement.

    scripts/regression_detection.py [--build build] [--compares 20] [--aa 100] [--pairs 10] [--ab-pairs 5]
                                    [--measured FILE]

Two measurements, both judged by `compare` at its defaults:
- build/tests/history/runner_detection_tool: A/A and A/B pairs of a 20-point
  CPU sweep timed in-process, back to back over three record layouts
  (summary: what runs record by default; repetitions; per-step samples), with
  a lookback, and interleaved (3 rounds a side, as `runner ab`);
- experiments/regression_detection.yaml through build/runner (the echo test
  plugin), `--pairs` back-to-back A/A and A/B pairs per effect, each judged by
  `runner compare A B --format json`, and `--ab-pairs` per effect of
  `runner ab` (3 interleaved rounds a side).
Keeps the JSON lines in bench/history/regression_detection.jsonl and rewrites
the table between the regression-detection markers of README.md from them.
--render-only renders the kept file; --runner-only --check --no-render is the
ctest (exit 1 when 4x misses a point, or 10 % or 50 % a compare).
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- regression-detection table begin -->", "<!-- regression-detection table end -->"


EFFECTS = [(0.0, "0 % (A/A)"), (0.02, "2 %"), (0.05, "5 %"), (0.10, "10 %"), (0.50, "50 %"), (3.0, "4x")]


def tally(done, command):
    """(regression flagged 0/1, points, points judged slower) of one JSON compare's output."""
    if done.returncode not in (0, 1):
        sys.exit(f"regression_detection.py: {command} failed: {done.stderr.strip()}")
    c = json.loads(done.stdout)
    rows = [r for r in c["rows"] if r["metric"] == "sleep_ms"]
    return int(c["regression"]), len(rows), sum(r["verdict"] == "slower" for r in rows)


def runner_setup(build):
    """The runner, its environment (the echo test plugin, no history) and the experiment."""
    runner = pathlib.Path(build) / "runner"
    env = dict(os.environ, RUNNER_PLUGIN_PATH=str(pathlib.Path(build) / "test_plugins/extra"), RUNNER_HISTORY="off")
    return runner, env, ROOT / "experiments/regression_detection.yaml"


def effect_rows(records, effects, pairs, judge, **extra):
    """For each effect, `pairs` verdicts of judge(effect, i) -> (flagged, points, slower) summed into a row."""
    rows = []
    for effect, name in effects:
        flagged = points = slower = 0
        for i in range(pairs):
            f, p, s = judge(effect, i)
            flagged, points, slower = flagged + f, points + p, slower + s
        rows.append({"records": records, "effect": effect, "effect_name": name, "compares": pairs, "points": points,
                     "slower_points": slower, "flagged_compares": flagged, **extra,
                     "point_rate": slower / points if points else 0, "compare_rate": flagged / pairs if pairs else 0})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def through_runner(build, pairs, work, effects=EFFECTS):
    """A/A and A/B pairs of experiments/regression_detection.yaml, judged by runner compare."""
    runner, env, exp = runner_setup(build)

    def judge(effect, i):
        dirs = []
        for side, extra in (("a", 0), ("b", round(effect * 2000))):
            out = pathlib.Path(work) / f"{effect}-{i}-{side}"
            shutil.rmtree(out, ignore_errors=True)
            subprocess.run([str(runner), str(exp), "--device", "cpu", "--out", str(out)], check=True,
                           env=dict(env, RUNNER_ECHO_EXTRA_SLEEP_US=str(extra)), capture_output=True)
            dirs.append(str(out))
        done = subprocess.run([str(runner), "compare", *dirs, "--format", "json"], env=env, capture_output=True,
                              text=True)
        return tally(done, "runner compare")

    return effect_rows("runner", effects, pairs, judge)


def through_ab(build, pairs, work, effects=EFFECTS):
    """A/A and A/B of experiments/regression_detection.yaml by `runner ab` (3 rounds a side, interleaved)."""
    runner, env, exp = runner_setup(build)

    def judge(effect, i):
        b = f"env RUNNER_ECHO_EXTRA_SLEEP_US={round(effect * 2000)} {runner}"
        done = subprocess.run([str(runner), "ab", str(exp), "--a", str(runner), "--b", b, "--device", "cpu",
                               "--work", str(pathlib.Path(work) / f"ab-{effect}-{i}"), "--format", "json"],
                              env=env, capture_output=True, text=True)
        return tally(done, "runner ab")

    return effect_rows("runner ab", effects, pairs, judge, rounds=3)


def check(rows):
    """The ctest's bar through the runner, on a few pairs: 4x slower in every
    point, 50 % and 10 % in every compare. False alarms need more pairs than a
    test can afford (and a machine without other load): the in-process ctest
    and the full table measure them."""
    ok = True
    for r in rows:
        e = r["effect"]
        bad = (e >= 3 and r["slower_points"] != r["points"]) or (e >= 0.1 and r["flagged_compares"] != r["compares"])
        if bad:
            print(f"detector misses the bar at {r['effect_name']}: {r['slower_points']} of {r['points']} points "
                  f"slower, {r['flagged_compares']} of {r['compares']} compares flagged", file=sys.stderr)
            ok = False
    return ok


def render(rows):
    layouts = {"summary": "in-process, summary (default: 10 steps)", "repetitions": "in-process, 5 repetitions x 10 steps",
               "samples": "in-process, 30 per-step samples", "runner": "runner, echo 2 ms (10 steps)",
               "summary + lookback": "in-process, summary + lookback of 10 runs",
               "summary, interleaved 3 rounds": "in-process, summary (10 steps), 3 rounds a side",
               "runner ab": "runner ab, echo 2 ms (10 steps), 3 rounds a side"}
    out = ["| design | records | effect | compares | flagged compares | slower points |", "|---|---|---|---:|---:|---:|"]
    for r in rows:
        design = "interleaved" if r.get("rounds") else "back to back"
        out.append("| {} | {} | {} | {} | {} ({:.1%}) | {} of {} ({:.1%}) |".format(
            design, layouts.get(r["records"], r["records"]), r["effect_name"], r["compares"], r["flagged_compares"],
            r["compare_rate"], r["slower_points"], r["points"], r["point_rate"]))
    def detects(r):
        # Over rounds only: a test over one run's steps cannot see the drift between two runs,
        # so what it claims to detect says nothing about the false alarms beside it.
        d = r.get("detectable", -1)
        return f", its points detecting about {d:.0%} at the machine's spread" if r.get("rounds") and d > 0 else ""

    aa = ["{} ({}): {} of {} ({:.1%}{})".format("interleaved" if r.get("rounds") else "back to back",
                                              layouts.get(r["records"], r["records"]), r["flagged_compares"],
                                              r["compares"], r["compare_rate"], detects(r))
          for r in rows if r["effect"] == 0]
    out += ["", "A/A false alarms (compares of the 20-point sweep flagged as a regression): " + "; ".join(aa) + "."]
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default=str(ROOT / "build"))
    p.add_argument("--compares", type=int, default=20)
    p.add_argument("--aa", type=int, default=100)
    p.add_argument("--pairs", type=int, default=10, help="A/A and A/B pairs per effect through the runner")
    p.add_argument("--ab-pairs", type=int, default=5, help="runner ab compares per effect (0: none)")
    p.add_argument("--measured", default=str(ROOT / "bench/history/regression_detection.jsonl"))
    p.add_argument("--render-only", action="store_true")
    p.add_argument("--runner-only", action="store_true")
    p.add_argument("--tool-only", action="store_true")
    p.add_argument("--check", action="store_true")
    p.add_argument("--no-render", action="store_true")
    a = p.parse_args()
    measured = pathlib.Path(a.measured)
    rows = []
    if a.render_only:
        rows = [json.loads(line) for line in measured.read_text().splitlines() if line.strip()]
    else:
        if not a.runner_only:
            tool = pathlib.Path(a.build) / "tests/history/runner_detection_tool"
            if not tool.exists():
                sys.exit(f"regression_detection.py: {tool} is missing; build it: cmake --build build --target runner_detection_tool")
            for extra in (["--records", "summary,repetitions,samples"], ["--records", "summary", "--lookback"],
                          ["--records", "summary", "--interleaved", "3"]):
                out = subprocess.run([str(tool), "--compares", str(a.compares), "--aa", str(a.aa), *extra], check=True,
                                     capture_output=True, text=True).stdout
                rows += [json.loads(line) for line in out.splitlines() if line.strip()]
        if not a.tool_only:
            with tempfile.TemporaryDirectory(prefix="regression-detection-") as work:
                # The ctest (--check) runs the effects check() holds to the bar (10 %, 50 %, 4x through
                # runner compare; A/A, 10 % and 4x through runner ab); the full table all of them.
                effects = [e for e in EFFECTS if e[0] >= 0.1] if a.check else EFFECTS
                rows += through_runner(a.build, a.pairs, work, effects)
                if a.ab_pairs:
                    effects = [e for e in EFFECTS if e[0] in (0, 0.1, 3.0)] if a.check else EFFECTS
                    rows += through_ab(a.build, a.ab_pairs, work, effects)
        if (a.runner_only or a.tool_only) and not a.no_render and measured.exists():
            # Keep the rows of the other measurement from before.
            kept = [json.loads(line) for line in measured.read_text().splitlines() if line.strip()]
            rows = [r for r in kept if r["records"].startswith("runner") == a.tool_only] + rows
        if not a.no_render:
            measured.write_text("".join(json.dumps(r) + "\n" for r in rows))
    if a.check and not check(rows):
        sys.exit(1)
    if a.no_render:
        return
    readme = ROOT / "README.md"
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        sys.exit(f"regression_detection.py: README.md has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    readme.write_text(head + BEGIN + "\n" + render(rows) + "\n" + END + tail)
    print(f"rendered {len(rows)} rows from {measured} into README.md")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""check_prose_numbers.py on small made-up trees: a report's typed number that a record or its own
table holds fails (only rendered values, declared constants and the runs' parameters pass), a
file listed as unconverted is held to the older rule and must leave the list once it passes; and
under the older rule a writeup number that only a raw record of
the cited report holds fails (the way an older run's numbers outlived a re-measurement), a
table cell, a value or a named run's record passes, and a section quotes only what it cites.

usage: check_prose_numbers_test.py <python> <check_prose_numbers.py>"""
import json
import os
import subprocess
import sys
import tempfile

PYTHON, CHECK = sys.argv[1], sys.argv[2]
REPORT_MD = "# demo\n\n<!-- runner:table t begin -->\n| a | b |\n|---|---:|\n| x | 41.5 |\n<!-- runner:table t end -->\n"


def tree(writeup, kernel_readme=None, report_prose="", unconverted=None):
    """`unconverted`: the files held to the older rule; by default the writeup and the README
    when the test writes them (a listed file that passes the strict rule fails the check)."""
    root = tempfile.mkdtemp(prefix="prose-numbers-")
    if unconverted is None:
        unconverted = (["reports/writeup.tex"] if writeup else []) + (["kernels/demo_kernel/README.md"]
                                                                      if kernel_readme else [])
    os.makedirs(os.path.join(root, "tests", "writeup"))
    os.makedirs(os.path.join(root, "experiments"))
    with open(os.path.join(root, "experiments", "demo.yaml"), "w") as f:
        f.write("report:\n  values:\n    - {name: t, expr: 'welch_t(\"t\", \"x\", \"b\", \"y\", \"b\")', format: \"%.1f\"}\n"
                "    - {name: v, expr: 'cell(\"t\", \"x\", \"b\")'}\n")
    with open(os.path.join(root, "tests", "writeup", "prose_numbers_unconverted.txt"), "w") as f:
        f.write("".join(f"{path} held to the older rule in this test\n" for path in unconverted))
    for rid, cell in (("demo", "41.5"), ("other", "73.25")):
        folder = os.path.join(root, "reports", rid)
        os.makedirs(os.path.join(folder, "data"))
        with open(os.path.join(folder, rid + ".md"), "w") as f:
            f.write(REPORT_MD.replace("41.5", cell) + (report_prose if rid == "demo" else ""))
        with open(os.path.join(folder, rid + ".t.csv"), "w") as f:
            f.write(f"a,b\nx,{cell}\n")
        with open(os.path.join(folder, rid + ".values.tex"), "w") as f:
            f.write(f"\\runnervalue{{{rid}.v}}{{{'0.875' if rid == 'demo' else '0.5'}}}\n")
        with open(os.path.join(folder, "data", "config.yaml"), "w") as f:
            f.write(f"report:\n  id: {rid}\n")
        with open(os.path.join(folder, "data", "results.jsonl"), "w") as f:
            f.write(json.dumps({"params": {"seq": 4096}, "metrics": {"ms": {"mean": 587.25 if rid == "demo" else 12.625}}}) +
                    "\n")
    with open(os.path.join(root, "reports", "writeup.tex"), "w") as f:
        f.write(writeup)
    if kernel_readme is not None:
        os.makedirs(os.path.join(root, "kernels", "demo_kernel"))
        with open(os.path.join(root, "kernels", "demo_kernel", "README.md"), "w") as f:
            f.write(kernel_readme)
    ab_round = os.path.join(root, "reports", "demo", "runs", "ab", "new-1")  # a tree A/B's round
    os.makedirs(ab_round)
    with open(os.path.join(ab_round, "results.jsonl"), "w") as f:
        f.write(json.dumps({"metrics": {"tflops": {"value": 777.125}}}) + "\n")
    with open(os.path.join(root, "reports", "demo", "data", "ncu-demo.txt"), "w") as f:
        f.write("Duration    ms    3.33\n")
    return root


def run(writeup, kernel_readme=None, **kw):
    return subprocess.run([PYTHON, CHECK, tree(writeup, kernel_readme, **kw)], capture_output=True, text=True)


def expect(name, writeup, ok, kernel_readme=None, **kw):
    r = run(writeup, kernel_readme, **kw)
    if (r.returncode == 0) != ok:
        print(f"FAIL {name}: exit {r.returncode}, expected {'0' if ok else 'non-zero'}\n{r.stdout}{r.stderr}")
        return False
    print(f"ok   {name}")
    return True


cite = "\\section{A}\nIt takes NUMBER ms (Table~\\ref{tab:demo:t}).\n"
results = [
    expect("table cell of the cited report", cite.replace("NUMBER", "41.5"), True),
    expect("value of the cited report", "\\section{A}\nRatio {} (\\val{demo.v}).\n".replace("{}", "0.875"), True),
    expect("raw record of the cited report only", cite.replace("NUMBER", "587.25"), False),
    expect("record of a run named by path", "\\section{A}\nIt takes 587.25 ms (\\texttt{reports/demo/data}).\n", True),
    expect("another section's report", "\\section{A}\n\\generated{other}{}\n\\section{B}\n" + cite.replace("NUMBER", "73.25"), False),
    expect("declared constant", "\\section{A}\n% constants: 587.25 (a made-up constant)\nIt takes 587.25 ms.\n", True,
           unconverted=()),
    expect("colour mix is no number", "\\section{A}\n\\fcolorbox{red!60!black}{x}\n", True, unconverted=()),
    # A kernel README quotes the records of the runs it names by path (an Nsight Compute page
    # beside them too) and the tables of the reports it names; nothing else.
    expect("kernel README: a named run's record", "", True,
           "# k\n\n| 2 | x | 587.25 TFLOP/s (`reports/demo/data/`) |\n"),
    expect("kernel README: a named run's ncu page", "", True, "# k\n\nDuration 3.33 ms (`reports/demo/data/`).\n"),
    expect("kernel README: a number no record holds", "", False, "# k\n\nIt ran at 612.5 TFLOP/s.\n"),
    expect("kernel README: a round of a named tree A/B", "", True,
           "# k\n\n| 3 | x | 777.125 TFLOP/s (`reports/demo/runs/ab/`) |\n"),
    expect("kernel README: a round of a tree A/B it does not name", "", False,
           "# k\n\n| 3 | x | 777.125 TFLOP/s (`reports/demo/data/`) |\n"),
    expect("kernel README: a report's table cell", "", True, "# k\n\nSee `other`: 73.25 ms.\n"),
]

# A report's prose (not listed as unconverted): only rendered values, declared constants, small
# integers and the runs' parameter values pass; a number its own table or records hold does not.
strict = dict(unconverted=())
results += [
    expect("report: a rendered value", "", True,
           report_prose="It takes <!-- runner:value v -->41.5<!-- runner:value end --> ms.\n", **strict),
    expect("report: its own table's cell typed by hand", "", False, report_prose="It takes 41.5 ms.\n", **strict),
    expect("report: a record's number typed by hand", "", False, report_prose="It takes 587.25 ms.\n", **strict),
    expect("report: a declared constant", "", True,
           report_prose="<!-- constants: 587.25 (a made-up size) -->\nIt takes 587.25 ms.\n", **strict),
    expect("report: a parameter of its records", "", True, report_prose="At seq 4096 it is slower.\n", **strict),
    expect("report: listed as unconverted, the older rule", "", True, report_prose="It takes 587.25 ms.\n",
           unconverted=("reports/demo/demo.md",)),
    expect("report: listed as unconverted but converted", "", False,
           report_prose="It takes <!-- runner:value v -->41.5<!-- runner:value end --> ms.\n",
           unconverted=("reports/demo/demo.md",)),
    # "Noise" is a measured claim: its paragraph renders a test statistic.
    expect("report: 'within its noise' with a rendered Welch t", "", True,
           report_prose="Within its noise (t = <!-- runner:value t -->1.2<!-- runner:value end -->).\n", **strict),
    expect("report: 'within its noise' with no statistic", "", False,
           report_prose="The two rows are within noise.\n", **strict),
    expect("report: 'is no noise' next to a plain cell value", "", False,
           report_prose="This gap is no noise: <!-- runner:value v -->41.5<!-- runner:value end --> ms.\n", **strict),
    # The writeup, once the lead drops it from the list, is held to the strict rule too.
    expect("writeup (converted): a cited table's cell typed by hand", cite.replace("NUMBER", "41.5"), False,
           unconverted=()),
    expect("writeup (converted): a declared constant",
           "\\section{A}\n% constants: 587.25 (a made-up constant)\nIt takes 587.25 ms.\n", True, unconverted=()),
    expect("kernel README (converted): a named run's record typed by hand", "", False,
           "# k\n\n| 2 | x | 587.25 TFLOP/s (`reports/demo/data/`) |\n", unconverted=()),
    # A kernel README quotes a report's values by their full name (rendered by runner report).
    expect("kernel README (converted): a report's value quoted by its full name", "", True,
           "# k\n\nIt takes <!-- runner:value demo.v -->41.5<!-- runner:value end --> ms.\n", unconverted=()),
    expect("kernel README (converted): 'within noise' with a quoted Welch t", "", True,
           "# k\n\nWithin noise (t = <!-- runner:value demo.t -->1.2<!-- runner:value end -->).\n", unconverted=()),
    expect("kernel README (converted): 'within noise' with a quoted plain value", "", False,
           "# k\n\nWithin noise (<!-- runner:value demo.v -->41.5<!-- runner:value end -->).\n", unconverted=()),
]


def expect_git(name, readme, ok):
    """A run committed, then removed from the tree: cited as `git show <commit>:reports/...`, its
    records still count, read from git; without the citation they do not."""
    root = tree("", unconverted=("kernels/demo_kernel/README.md",))
    old = os.path.join(root, "reports", "demo", "runs", "old")
    os.makedirs(old)
    with open(os.path.join(old, "results.jsonl"), "w") as f:
        f.write(json.dumps({"metrics": {"tflops": {"value": 654.375}}}) + "\n")
    git = ["git", "-C", root, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", root], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "records"], check=True)
    commit = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    subprocess.run(git + ["rm", "-rq", "reports/demo/runs/old"], check=True)
    subprocess.run(git + ["commit", "-qm", "records out"], check=True)
    os.makedirs(os.path.join(root, "kernels", "demo_kernel"))
    with open(os.path.join(root, "kernels", "demo_kernel", "README.md"), "w") as f:
        f.write(readme.replace("COMMIT", commit))
    r = subprocess.run([PYTHON, CHECK, root], capture_output=True, text=True)
    if (r.returncode == 0) != ok:
        print(f"FAIL {name}: exit {r.returncode}, expected {'0' if ok else 'non-zero'}\n{r.stdout}{r.stderr}")
        return False
    print(f"ok   {name}")
    return True


results += [
    expect_git("kernel README: a run that left the tree, cited by git show",
               "# k\n\n| 4 | x | 654.375 TFLOP/s (`git show COMMIT:reports/demo/runs/old/`) |\n", True),
    expect_git("kernel README: a run that left the tree, not cited", "# k\n\n| 4 | x | 654.375 TFLOP/s |\n", False),
]
sys.exit(0 if all(results) else 1)

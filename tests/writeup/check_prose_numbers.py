#!/usr/bin/env python3
"""Every number in the prose of reports/<id>/<id>.md, kernels/*/README.md and reports/writeup.tex is
rendered from records or declared.

usage: check_prose_numbers.py <source dir> [--list]

A measured number in prose is a rendered value: `{{value name}}` in Markdown (between
<!-- runner:value name --> markers once rendered; a kernel README quotes a report's value by its
full name, `{{value <id>.name}}`, which `runner report` of that report renders into the README
and `runner report --check` checks), \val{<id>.name} in LaTeX, whose expression in
experiments/<name>.yaml names its source (a cell, a column's min/max, a ratio, a range, a test
statistic). So a number in the prose, outside the blocks `runner report` renders (tables, figures,
values), code and comments, passes only when it is
  - an integer up to 16 (counts of GPUs, steps, layers, list items),
  - a parameter or label value of the records it describes (a swept size such as seq 4096 is
    configuration, not a measurement): the runs that render the report and the runs its prose
    names by path (`reports/<experiment>/data`, `reports/<experiment>/runs/<name>`, `runs/<name>`),
    exactly, or
  - declared where it is used, with its reason (a version, a size the assignment fixes):
    Markdown: <!-- constants: 25 (PyTorch DDP's default bucket_cap_mb); 2.11 (PyTorch) -->
    LaTeX:    % constants: 25 (PyTorch DDP's default bucket_cap_mb); 2.11 (PyTorch)
A paragraph that calls a difference noise ("within its noise", "is no noise") renders a test
statistic of it: a value whose expression is welch_t(...) or mann_whitney_p(...).
Any other number fails, even one that some record holds: among hundreds of records almost any
number matches something, which is how a wrong range passed when its ends existed somewhere.

tests/writeup/prose_numbers_unconverted.txt lists files ("<file> <reason>") whose numbers are not
all rendered yet; they are held to the older rule until converted: a number must equal, within its
rounding, a number of its report's tables, rendered values, the records of its runs and of the runs
it names (`git show <commit>:reports/<path>` names records that left the tree); a writeup section
may quote only the tables, values and named runs of the reports it cites (\ref{tab:<id>:...},
\generated{<id>}, \val{<id>....}). An entry whose file passes the strict rule fails the check until
it is dropped, so the list only shrinks. tests/writeup/prose_numbers_pending.txt lists single
numbers ("<file> <number> <reason>") the same way.
Exit 1 with one line per number that fails; --list prints every checked number.
"""
import csv
import glob
import math
import os
import re
import sys

# Records are read as the runner reads them: torn and superseded writes do not count.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from runner_records import parse_records, read_records  # noqa: E402

SMALL_INTEGER = 16
RENDERED_BLOCK = re.compile(
    r"<!-- runner:(table|figure) (\S+) begin -->.*?<!-- runner:\1 \2 end -->", re.S)
RENDERED_VALUE = re.compile(r"<!-- runner:value (\S+) -->(.*?)<!-- runner:value end -->", re.S)
CONSTANTS_MD = re.compile(r"<!--\s*constants:(.*?)-->", re.S)
CONSTANTS_TEX = re.compile(r"^\s*%\s*constants:(.*)$", re.M)
CONSTANT_ENTRY = re.compile(r"([-+]?[\d.,]+(?:e[-+]?\d+)?)\s*\(([^()]*(?:\([^()]*\)[^()]*)*)\)")
NUMBER = re.compile(r"(?<![\w.^/\\@#-])(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(?:[eE][-+]?\d+)?")
POWER_OF_TEN = re.compile(r"\s*(?:·|×|\\times|\$\\times\$)\s*\$?10(?:\^\{?([-−]?\d+)\}?|([⁻⁰¹²³⁴⁵⁶⁷⁸⁹]+))\$?")
# A claim about noise ("within its noise", "is no noise") rests on a test statistic: the same
# paragraph renders a value computed by welch_t(...) or mann_whitney_p(...).
NOISE_CLAIM = re.compile(r"\b(?:within|below|above|beyond) (?:its |the |their )?noise\b|\b(?:is|are|was|were) (?:no |not )?noise\b",
                         re.I)
STATISTIC_VALUE = re.compile(r"^\s*-\s*\{name:\s*([a-z0-9_]+),\s*expr:\s*'[^']*\b(?:welch_t|mann_whitney_p)\(", re.M)
SECTION_START = re.compile(r"\\(?:section|subsection|question)\*?\{")
CITATION = re.compile(r"\\(?:ref\{(?:tab|fig):|generated\{|val\{)([A-Za-z0-9_]+)[:.}]")
SUPERSCRIPTS = str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789")
# A run named in prose: reports/<experiment>/data, reports/<experiment>/runs/<name> (a {a,b}
# list names several), or runs/<name> relative to the report's folder.
GIT_MENTION = re.compile(r"git show ([0-9a-f]{7,40}):(reports/[A-Za-z0-9_./{},-]*)")
DATA_MENTION = re.compile(r"reports/([A-Za-z0-9_]+)/(data|runs/[A-Za-z0-9_{},]+)|(?<![\w/])(runs/[A-Za-z0-9_{},]+)")


def numbers_in(text):
    """(value, decimals, position, text) of each number token that reads as a quantity."""
    out = []
    for m in NUMBER.finditer(text):
        token = m.group(0)
        after = text[m.end():m.end() + 2]
        if after[:1] and (after[:1].isalnum() or after[:1] in "_^") and after[:1] not in "x×":
            continue  # an identifier: H100, 2.7B, fp32 (the lookbehind catches sm_90, v2)
        if after[:1] in "x" and after[1:2].isalnum():
            continue  # 0x1f, 2xH200
        if after[:1] == "." and after[1:2].isdigit():
            continue  # 2.11.0: a version
        if after[:1] == "-" and after[1:2].isdigit():
            continue  # a date or a range written with a hyphen inside a name
        if after[:1] == ":" and after[1:2].isdigit():
            continue  # a time of day
        if after[:1] == "!" or text[m.start() - 1:m.start()] == "!":
            continue  # red!60!black: a colour mix
        if text[m.start() - 1:m.start()] == "\\" or after[:1] == "\\" and after[1:2].isalpha() and \
                not text[m.end():].startswith(("\\times", "\\%", "\\,", "\\ ", "\\text", "\\mathrm", "\\,")):
            continue  # 0.9\linewidth
        mantissa = m.group(1).replace(",", "")
        decimals = len(m.group(2)) - 1 if m.group(2) else 0
        try:
            value = float(mantissa + (m.group(2) or "") + token[len(m.group(1)) + len(m.group(2) or ""):])
        except ValueError:
            continue
        power = POWER_OF_TEN.match(text, m.end())
        if power:  # 2.20·10¹¹, 4.7\times10^{-2}: the mantissa's rounding, scaled
            exponent = power.group(1) or power.group(2).translate(SUPERSCRIPTS)
            scale = 10.0 ** int(exponent.replace("−", "-"))
            value *= scale
            decimals -= int(exponent.replace("−", "-"))
            token += text[m.end():power.end()]
        out.append((value, decimals, m.start(), token))
    return out


def json_numbers(node, out):
    if isinstance(node, bool):
        return
    if isinstance(node, (int, float)):
        if math.isfinite(node):
            out.append(abs(float(node)))
    elif isinstance(node, dict):
        for v in node.values():
            json_numbers(v, out)
    elif isinstance(node, list):
        for v in node:
            json_numbers(v, out)
    elif isinstance(node, str):
        try:
            out.append(abs(float(node)))
        except ValueError:  # a message or a derivation: the numbers in it
            out.extend(v for v, _, _, _ in numbers_in(node))


class Pool:
    def __init__(self):
        self.values = []

    def add(self, values):
        self.values.extend(values)

    def finish(self):
        self.values = sorted(set(self.values))

    def matches(self, value, decimals, percent):
        half = 0.5 * 10.0 ** -decimals * (1 + 1e-9) + 1e-12
        import bisect
        for candidate in (value, value / 100) if percent else (value,):
            h = half / 100 if candidate is not value else half
            i = bisect.bisect_left(self.values, candidate - h)
            if i < len(self.values) and self.values[i] <= candidate + h:
                return True
        return False


def expand_braces(name):
    """a{b,c}d -> [abd, acd]."""
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [out for part in m.group(1).split(",") for out in expand_braces(name[:m.start()] + part + name[m.end():])]


def mentioned_runs(text, report_id=None):
    """The runs (folders relative to reports/) a text names; runs/<name> alone is relative to
    the report's own folder."""
    runs = []
    for m in DATA_MENTION.finditer(text):
        if m.group(1):
            runs += [m.group(1) + "/" + r.rstrip("}") for r in expand_braces(m.group(2))]
        elif report_id:
            runs += [report_id + "/" + r.rstrip("}") for r in expand_braces(m.group(3))]
    return runs


def git_numbers(root, commit, path, cache={}):
    """The numbers of the records, tables and pages under reports/<path> at a commit (records
    that left the tree, cited as `git show <commit>:<path>`)."""
    import subprocess
    key = (commit, path)
    if key not in cache:
        listing = subprocess.run(["git", "-C", root, "ls-tree", "-r", "--name-only", commit, "--", path.rstrip("/")],
                                 capture_output=True, text=True)
        if listing.returncode != 0:
            sys.exit(f"git show {commit}:{path}: not readable from git ({listing.stderr.strip()}); the check "
                     "needs the repository's history")
        files = [f for f in listing.stdout.split("\n") if f.endswith((".jsonl", ".md", ".csv", ".txt", ".tex"))]
        out = []
        for name in files:
            blob = subprocess.run(["git", "-C", root, "show", f"{commit}:{name}"], capture_output=True, text=True,
                                  errors="replace").stdout
            if name.endswith(".jsonl"):
                for record in parse_records(blob.split("\n")):
                    json_numbers(record, out)
            else:
                out.extend(v for v, _, _, _ in numbers_in(blob))
        cache[key] = out
    return cache[key]


def git_mentions(text):
    """(commit, path) of each `git show <commit>:reports/...` in a text; {a,b} names several."""
    return [(m.group(1), p.rstrip("}")) for m in GIT_MENTION.finditer(text) for p in expand_braces(m.group(2).rstrip(".,"))]


class Reports:
    def __init__(self, root):
        self.root = root
        self.reports = os.path.join(root, "reports")
        self.record_cache = {}
        self.report_ids = sorted(os.path.basename(os.path.dirname(p))
                                 for p in glob.glob(os.path.join(self.reports, "*", "*.md"))
                                 if os.path.basename(p) == os.path.basename(os.path.dirname(p)) + ".md")
        self.runs_of = {}  # report id -> runs (folders relative to reports/) whose config renders it
        for config in sorted(glob.glob(os.path.join(self.reports, "*", "data", "config.yaml")) +
                             glob.glob(os.path.join(self.reports, "*", "runs", "*", "config.yaml"))):
            with open(config, encoding="utf-8") as f:
                text = f.read()
            for report_id in re.findall(r"^\s*-?\s*id:\s*([A-Za-z0-9_-]+)\s*$", text, re.M):
                self.runs_of.setdefault(report_id, []).append(os.path.relpath(os.path.dirname(config), self.reports))

    def md_path(self, report_id):
        return os.path.join(self.reports, report_id, report_id + ".md")

    def record_numbers(self, run):
        if run not in self.record_cache:
            out = []
            # Text the run left beside its records (a cross-check's table, a log) counts too.
            # (Nsight Compute pages, ncu-*.txt, and stage logs are *.txt.)
            for extra in sorted(glob.glob(os.path.join(self.reports, run, "*.md")) +
                                glob.glob(os.path.join(self.reports, run, "*.csv")) +
                                glob.glob(os.path.join(self.reports, run, "*.txt"))):
                with open(extra, encoding="utf-8", errors="replace") as f:
                    out.extend(v for v, _, _, _ in numbers_in(f.read()))
            # A tree A/B (two builds side by side) keeps one run per round and tree
            # (base-1, new-1, ...) inside the folder the prose names.
            for path in glob.glob(os.path.join(self.reports, run, "results.jsonl")) + sorted(
                    glob.glob(os.path.join(self.reports, run, "*", "results.jsonl"))):
                for record in read_records(path):
                    json_numbers(record, out)
            self.record_cache[run] = out
        return self.record_cache[run]

    def param_numbers(self, run):
        """The parameter and label values of a run's records, exactly: what it was configured with."""
        out = set()
        for path in glob.glob(os.path.join(self.reports, run, "results.jsonl")) + sorted(
                glob.glob(os.path.join(self.reports, run, "*", "results.jsonl"))):
            for record in read_records(path):
                for key in ("params", "labels"):
                    for v in (record.get(key) or {}).values():
                        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                            out.add(abs(float(v)))
        return out

    def configured(self, text, report_id=None):
        """The parameter values of the runs a text describes (its report's, and those it names)."""
        runs = set(self.runs_of.get(report_id, [])) if report_id else set()
        runs.update(mentioned_runs(text, report_id) if report_id else mentioned_runs(text))
        out = set()
        for run in runs:
            out |= self.param_numbers(run)
        return out

    def table_numbers(self, report_id):
        out = []
        for path in glob.glob(os.path.join(self.reports, report_id, report_id + ".*.csv")):
            with open(path, encoding="utf-8", newline="") as f:
                for row in csv.reader(f):
                    for cell in row:
                        try:
                            out.append(abs(float(cell)))
                        except ValueError:
                            out.extend(v for v, _, _, _ in numbers_in(cell))
        return out

    def pool_for(self, report_id, text):
        pool = Pool()
        pool.add(self.table_numbers(report_id))
        rendered = "".join(m.group(0) for m in RENDERED_BLOCK.finditer(text))
        rendered += "".join(m.group(2) for m in RENDERED_VALUE.finditer(text))
        pool.add(v for v, _, _, _ in numbers_in(rendered))
        runs = set(self.runs_of.get(report_id, []))
        runs.update(mentioned_runs(text, report_id))
        for run in runs:
            pool.add(self.record_numbers(run))
        for commit, path in git_mentions(text):
            pool.add(git_numbers(self.root, commit, path))
        self.add_named_reports(pool, text, report_id)
        pool.add(self.value_numbers(report_id))
        return pool

    def readme_pool(self, text):
        """What a kernel README may quote: the records of the runs it names by path, and the
        tables and values of the reports it names."""
        pool = Pool()
        for run in mentioned_runs(text):
            pool.add(self.record_numbers(run))
        for commit, path in git_mentions(text):
            pool.add(git_numbers(self.root, commit, path))
        self.add_named_reports(pool, text)
        pool.finish()
        return pool

    def add_named_reports(self, pool, text, own=None):
        """Another report the text names (`analytic_accounting.md`): its tables and values."""
        for other in self.report_ids:
            if other != own and re.search(r"(?<![\w])" + re.escape(other) + r"(?![\w])", text):
                pool.add(self.table_numbers(other))
                pool.add(self.value_numbers(other))

    def cited_pool(self, block):
        """What a writeup section may quote: the tables, rendered numbers and values of the
        reports it cites, and the records of the runs it names by path."""
        pool = Pool()
        for report_id in set(CITATION.findall(block)) & set(self.report_ids):
            pool.add(self.table_numbers(report_id))
            pool.add(self.value_numbers(report_id))
            with open(self.md_path(report_id), encoding="utf-8") as f:
                md = f.read()
            rendered = "".join(m.group(0) for m in RENDERED_BLOCK.finditer(md))
            rendered += "".join(m.group(2) for m in RENDERED_VALUE.finditer(md))
            pool.add(v for v, _, _, _ in numbers_in(rendered))
        plain = block.replace("\\_", "_").replace("\\{", "{").replace("\\}", "}")
        for run in mentioned_runs(plain):
            pool.add(self.record_numbers(run))
        for commit, path in git_mentions(plain):
            pool.add(git_numbers(self.root, commit, path))
        pool.finish()
        return pool

    def value_numbers(self, report_id):
        path = os.path.join(self.reports, report_id, report_id + ".values.tex")
        if not os.path.exists(path):
            return []
        with open(path, encoding="utf-8") as f:
            return [v for line in f if line.startswith("\\runnervalue")
                    for v, _, _, _ in numbers_in(line[line.index("}{") + 2:])]


def constants_of(text, pattern, where):
    constants, problems = set(), []
    for m in pattern.finditer(text):
        body = m.group(1).strip()
        entries = CONSTANT_ENTRY.findall(body)
        rest = CONSTANT_ENTRY.sub("", body).replace(";", "").strip()
        if rest or not entries:
            problems.append(f"{where}: constants: '{body[:60]}': write each as NUMBER (reason); ...")
        for number, reason in entries:
            if not reason.strip():
                problems.append(f"{where}: constant {number}: give a reason")
            constants.add(float(number.replace(",", "")))
    return constants, problems


def strip_markdown(text):
    """The prose of a report: rendered blocks, values, comments, code and link targets blanked
    (same length, so positions still give line numbers)."""
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    for pattern in (RENDERED_BLOCK, RENDERED_VALUE, re.compile(r"<!--.*?-->", re.S),
                    re.compile(r"```.*?```", re.S), re.compile(r"`[^`\n]*`"),
                    re.compile(r"\]\([^)\n]*\)"), re.compile(r"https?://\S+")):
        text = pattern.sub(blank, text)
    return text


def strip_latex(text):
    blank = lambda m: re.sub(r"[^\n]", " ", m.group(0))
    text = re.sub(r"(\d)\\,(\d{3})(?!\d)", lambda m: m.group(1) + m.group(2) + "  ", text)
    for pattern in (re.compile(r"(?<!\\)%.*"),
                    re.compile(r"\\(?:label|ref|eqref|cref|input|include|includegraphics|url|href|cite|"
                               r"begin|end|texttt|path|val|nolinkurl|hypersetup|usepackage|documentclass|"
                               r"setlength|geometry|definecolor|newcommand|renewcommand|vspace|hspace)"
                               r"(?:\[[^\]]*\])*\{[^{}]*\}"),
                    re.compile(r"\\verb(.).*?\1"),
                    re.compile(r"\[(?:width|height|scale|angle)=[^\]]*\]"),
                    re.compile(r"\\begin\{verbatim\}.*?\\end\{verbatim\}", re.S)):
        text = pattern.sub(blank, text)
    return text


def check(where, text, prose, pool, constants, listing, start=0):
    """`pool`: None checks strictly (rendered or declared only; `constants` holds the declared
    numbers and the configured ones); else the older rule, any number of the pool."""
    bad = []
    # 4.6·10¹⁴ in prose is 4.6 × 10^14, one ulp off the parameter 4.6e14: compare at 12 digits.
    norm = lambda v: float(f"{v:.12g}")
    constants = {norm(c) for c in constants}
    for value, decimals, pos, token in numbers_in(prose):
        if pos < start:
            continue
        if decimals == 0 and value <= SMALL_INTEGER:
            continue
        percent = prose[pos + len(token):pos + len(token) + 3].lstrip().startswith(("%", "\\%"))
        line = text.count("\n", 0, pos) + 1
        ok = norm(value) in constants or (pool is not None and pool.matches(value, decimals, percent))
        if listing:
            print(f"{where}:{line}: {token} {'ok' if ok else 'NO MATCH'}")
        if not ok:
            context = prose[max(0, pos - 40):pos + len(token) + 20].replace("\n", " ")
            what = ("matches no record, table or value of this report" if pool is not None else
                    "is neither a rendered value nor a declared constant")
            bad.append(f"{where}:{line}: {token} {what} "
                       f"(\"...{context.strip()}...\"); render it ({{{{value ...}}}} in Markdown, \\val{{}} in LaTeX) or declare it "
                       f"a constant with its reason")
    return bad


def statistic_values(root):
    """Names of the values (experiments/**/*.yaml) that a test statistic computes."""
    names = set()
    for path in glob.glob(os.path.join(root, "experiments", "**", "*.yaml"), recursive=True):
        with open(path, encoding="utf-8") as f:
            names.update(STATISTIC_VALUE.findall(f.read()))
    return names


def unbacked_noise_claims(where, text, statistics):
    """A paragraph of prose that claims something is (within) noise without rendering a test
    statistic (welch_t, mann_whitney_p) fails: "noise" is a measured claim too."""
    bad = []
    prose = strip_markdown(text)
    for m in re.finditer(r"(?:[^\n]+\n?)+", prose):  # paragraphs: runs of non-blank lines
        claim = NOISE_CLAIM.search(m.group(0))
        if not claim:
            continue
        # A kernel README quotes a report's value by its full name, <report>.<name>.
        rendered = set(v.group(1).rsplit(".", 1)[-1] for v in RENDERED_VALUE.finditer(text[m.start():m.end()]))
        if not rendered & statistics:
            line = text.count("\n", 0, m.start() + claim.start()) + 1
            bad.append(f"{where}:{line}: \"{claim.group(0)}\" with no test statistic in its paragraph; render "
                       f"welch_t(...) or mann_whitney_p(...) of the cells it compares ({{{{value ...}}}}), or drop the claim")
    return bad


def read_list(root, name, fields):
    """The entries of tests/writeup/<name>: `fields` whitespace-separated fields per line, the
    last one the reason (free text); '#' starts a comment."""
    entries = []
    path = os.path.join(root, "tests", "writeup", name)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split(None, fields - 1)
                if len(parts) < fields:
                    shape = "<file> <number> <reason>" if fields == 3 else "<file> <reason>"
                    sys.exit(f"{path}:{n}: expected '{shape}'")
                entries.append(parts)
    return entries


def read_unconverted(root):
    return {file: reason for file, reason in read_list(root, "prose_numbers_unconverted.txt", 2)}


def read_pending(root):
    return {(file, number): reason for file, number, reason in read_list(root, "prose_numbers_pending.txt", 3)}


def main():
    root = sys.argv[1]
    listing = "--list" in sys.argv
    reports = Reports(root)
    pending = read_pending(root)
    unconverted = read_unconverted(root)
    statistics = statistic_values(root)
    problems, converted = [], []

    def checked(where, text, prose, older_pool, constants, start=0):
        """Strict unless the file is listed as unconverted; a listed file that passes strictly
        is reported, so the list shrinks."""
        strict = check(where, text, prose, None, constants | configured, listing and where not in unconverted, start)
        if where not in unconverted:
            return strict
        if not strict:
            converted.append(where)
        return check(where, text, prose, older_pool(), constants, listing, start)

    for report_id in reports.report_ids:
        md = reports.md_path(report_id)
        with open(md, encoding="utf-8") as f:
            text = f.read()
        where = os.path.relpath(md, root)
        constants, bad = constants_of(text, CONSTANTS_MD, where)
        problems += bad
        configured = reports.configured(text, report_id)

        def older(report_id=report_id, text=text):
            pool = reports.pool_for(report_id, text)
            pool.finish()
            return pool
        problems += checked(where, text, strip_markdown(text), older, constants)
        if where not in unconverted:
            problems += unbacked_noise_claims(where, text, statistics)
    tex = os.path.join(reports.reports, "writeup.tex")
    if os.path.exists(tex):
        with open(tex, encoding="utf-8") as f:
            text = f.read()
        where = os.path.relpath(tex, root)
        constants, bad = constants_of(text, CONSTANTS_TEX, where)
        problems += bad
        prose = strip_latex(text)
        starts = [m.start() for m in SECTION_START.finditer(text)]
        tex_converted = True
        for a, b in zip([0] + starts, starts + [len(text)]):
            block = text[a:b].replace("\\_", "_")
            configured = set()
            for report_id in set(CITATION.findall(text[a:b])) & set(reports.report_ids):
                configured |= reports.configured("", report_id)
            configured |= reports.configured(block)
            n_converted = len(converted)
            problems += checked(where, text, prose[:b], lambda block=text[a:b]: reports.cited_pool(block), constants,
                                start=a)
            tex_converted = tex_converted and len(converted) > n_converted
            del converted[n_converted:]
        if where in unconverted and tex_converted:
            converted.append(where)
    for readme in sorted(glob.glob(os.path.join(root, "kernels", "*", "README.md"))):
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        where = os.path.relpath(readme, root)
        constants, bad = constants_of(text, CONSTANTS_MD, where)
        problems += bad
        configured = reports.configured(text)
        problems += checked(where, text, strip_markdown(text), lambda text=text: reports.readme_pool(text), constants)
        if where not in unconverted:
            problems += unbacked_noise_claims(where, text, statistics)
    used = set()
    kept = []
    for p in problems:
        where, _, rest = p.partition(": ")
        key = (where.rsplit(":", 1)[0], rest.split(" ", 1)[0])
        if key in pending:
            used.add(key)
        else:
            kept.append(p)
    for key in sorted(set(pending) - used):
        print(f"note: tests/writeup/prose_numbers_pending.txt: {key[0]} {key[1]} matches now; drop the entry")
    problems = kept
    for where in converted:
        problems.append(f"{where}: every number is rendered or declared now; drop it from "
                        f"tests/writeup/prose_numbers_unconverted.txt so it stays so")
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s): numbers neither rendered nor declared", file=sys.stderr)
        return 1
    print("every number in the prose of reports/<id>/<id>.md, reports/writeup.tex and kernels/*/README.md "
          "is rendered or declared (files in prose_numbers_unconverted.txt: matches its records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

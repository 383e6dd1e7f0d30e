#!/usr/bin/env python3
"""Writes the option table of every plugin README from the plugin's manifest.

    scripts/plugin_readme_tables.py [path/to/runner]     (default: build/runner)

The table is what `runner describe <kind>/<name> --markdown` prints: the block of
lines that starts with "| option |". A test (PluginReadme.OptionTableIsTheManifests)
fails while a README's table differs, so options are described in one place: the
manifest's help text.
"""
import pathlib
import subprocess
import sys

root = pathlib.Path(__file__).resolve().parent.parent
runner = sys.argv[1] if len(sys.argv) > 1 else str(root / "build" / "runner")
missing = []
for readme in sorted(root.glob("plugins/*/*/README.md")):
    kind, name = readme.parent.parent.name, readme.parent.name
    table = subprocess.run([runner, "describe", f"{kind}/{name}", "--markdown"], check=True,
                           capture_output=True, text=True).stdout.splitlines()
    lines = readme.read_text().splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("| option |")), None)
    if start is None:
        if table:
            missing.append(str(readme.relative_to(root)))
        continue
    end = start
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    new = lines[:start] + table + lines[end:]
    if new != lines:
        readme.write_text("\n".join(new) + "\n")
        print(f"wrote {readme.relative_to(root)}")
if missing:
    print("no '| option |' table to replace (add one where the options belong):", *missing, sep="\n  ")
    sys.exit(1)

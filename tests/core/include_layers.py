#!/usr/bin/env python3
"""No include arrow runs back up the layers of runner/ (issue 47).

Layers, lowest first: runner/api (the public headers, runner_api and runner_records), then
runner/history (runner_history), then the host's runner_config library, then runner_core
(both listed in runner/host/CMakeLists.txt). A file may include its own layer and the ones
below it. The host's headers are included by bare name or by a path under runner/host, so
each quoted include is resolved as the compiler would: beside the including file, then from
the include roots of its layer.

    include_layers.py [ROOT]     exit 1 naming each arrow back up, 0 when there is none
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources_of(cmake_text, library):
    """The source files add_library(<library> ...) lists."""
    m = re.search(r"add_library\(%s\s+(?:OBJECT|SHARED|STATIC)?(.*?)\)" % library, cmake_text, re.S)
    if not m:
        sys.exit(f"include_layers.py: runner/host/CMakeLists.txt has no add_library({library} ...)")
    return [w for w in m.group(1).split() if w.endswith(".cpp")]


def main(root):
    runner = os.path.join(root, "runner")
    host = os.path.join(runner, "host")
    api_include = os.path.join(runner, "api", "include")
    cmake = open(os.path.join(host, "CMakeLists.txt")).read()
    config_sources = {os.path.join(host, s) for s in sources_of(cmake, "runner_config")}
    core_sources = {os.path.join(host, s) for s in sources_of(cmake, "runner_core")}

    def layer(path):
        path = os.path.normpath(path)
        if path.startswith(os.path.join(runner, "api") + os.sep):
            return 0, "runner/api"
        if path.startswith(os.path.join(runner, "history") + os.sep):
            return 1, "runner/history"
        if path.startswith(host + os.sep):
            stem = os.path.splitext(path)[0]
            if stem + ".cpp" in core_sources:
                return 3, "runner_core"
            return 2, "runner_config"  # its sources and every header no runner_core source owns
        return None

    roots = {0: [api_include], 1: [runner, api_include], 2: [host, api_include, runner], 3: [host, api_include, runner]}
    arrows = []
    files = sorted(config_sources | core_sources)
    for base, _, names in os.walk(runner):
        files += [os.path.join(base, n) for n in names if n.endswith((".hpp", ".h", ".cuh")) or
                  (n.endswith(".cpp") and not base.startswith(host))]
    for path in sorted(set(files)):
        own = layer(path)
        if own is None or not os.path.exists(path) or "_test" in os.path.basename(path):
            continue
        for name in INCLUDE.findall(open(path, encoding="utf-8").read()):
            for directory in [os.path.dirname(path)] + roots[own[0]]:
                target = os.path.normpath(os.path.join(directory, name))
                if os.path.exists(target):
                    theirs = layer(target)
                    if theirs and theirs[0] > own[0]:
                        arrows.append(f"{os.path.relpath(path, root)}: includes {name} "
                                      f"({theirs[1]}, above its own layer {own[1]})")
                    break
    for a in arrows:
        print(a)
    print(f"include_layers: {len(arrows)} include(s) running back up" if arrows else
          "include_layers: no include runs back up (runner/api < runner/history < runner_config < runner_core)")
    return 1 if arrows else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")))

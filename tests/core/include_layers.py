#!/usr/bin/env python3
"""No include arrow runs back up the layers of runner/ (issue 47).

Layers, lowest first: runner/api (the public headers, runner_api and runner_records), then
runner/history (runner_history), then the host's rooms in the order runner/host/CMakeLists.txt
lists them in `set(host_rooms ...)`: each room is one OBJECT library whose sources lie in one
folder of runner/host (base/, report/, config/, ...), and last the folder of the two binaries'
sources (cli/). A file may include its own layer and the ones below it. The host's headers are
included by room ("config/sweep.hpp"): an include that only resolves beside the including file
is refused too, as is a file of runner/host that lies in no room's folder.

    include_layers.py [ROOT]     exit 1 naming each arrow back up, 0 when there is none
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".cpp", ".hpp", ".h", ".cuh", ".cu")


def library_sources(cmake_text, kind, name):
    """The source files add_<kind>(<name> ...) lists."""
    m = re.search(r"add_%s\(%s\s+(?:OBJECT|SHARED|STATIC)?(.*?)\)" % (kind, name), cmake_text, re.S)
    if not m:
        sys.exit(f"include_layers.py: runner/host/CMakeLists.txt has no add_{kind}({name} ...)")
    return [w for w in m.group(1).split() if w.endswith(".cpp")]


def host_rooms(cmake_text):
    """[(library, folder)] lowest first, then ("binaries", folder of the executables' sources)."""
    m = re.search(r"set\(host_rooms\s+(.*?)\)", cmake_text, re.S)
    if not m:
        sys.exit("include_layers.py: runner/host/CMakeLists.txt has no set(host_rooms ...)")
    rooms = []
    for library in m.group(1).split():
        folders = {os.path.dirname(s) for s in library_sources(cmake_text, "library", library)}
        if len(folders) != 1 or "" in folders:
            sys.exit(f"include_layers.py: {library}'s sources lie in {sorted(folders)}, not in one folder of runner/host")
        rooms.append((library, folders.pop()))
    binaries = {os.path.dirname(s) for exe in ("runner_torch", "runner")
                for s in library_sources(cmake_text, "executable", exe)}
    if len(binaries) != 1:
        sys.exit(f"include_layers.py: the binaries' sources lie in {sorted(binaries)}, not in one folder")
    rooms.append(("the binaries", binaries.pop()))
    return rooms


def main(root):
    runner = os.path.join(root, "runner")
    host = os.path.join(runner, "host")
    api_include = os.path.join(runner, "api", "include")
    rooms = host_rooms(open(os.path.join(host, "CMakeLists.txt")).read())
    layers = [("runner/api", os.path.join(runner, "api")), ("runner/history", os.path.join(runner, "history"))]
    layers += [(f"{folder}/ ({library})", os.path.join(host, folder)) for library, folder in rooms]
    order = " < ".join(name.split(" ")[0] for name, _ in layers)

    def layer(path):
        path = os.path.normpath(path)
        for index, (name, folder) in enumerate(layers):
            if path.startswith(folder + os.sep):
                return index, name
        return None

    # The include roots a file of each layer compiles with (its targets' include directories).
    roots = {0: [api_include], 1: [runner, api_include]}
    problems = []
    files = []
    for base, _, names in os.walk(runner):
        files += [os.path.join(base, n) for n in names if n.endswith(SOURCES)]
    for path in sorted(files):
        if "_test" in os.path.basename(path):
            continue
        own = layer(path)
        if own is None:
            if path.startswith(host + os.sep):
                problems.append(f"{os.path.relpath(path, root)}: lies in no room of runner/host/CMakeLists.txt")
            continue
        for name in INCLUDE.findall(open(path, encoding="utf-8").read()):
            # As the compiler resolves it: beside the including file, then the include roots.
            candidates = [os.path.dirname(path)] + roots.get(own[0], [host, api_include, runner])
            found = [os.path.normpath(os.path.join(d, name)) for d in candidates]
            target = next((f for f in found if os.path.exists(f)), None)
            if target is None:
                continue  # a system header written in quotes, or one generated at build time
            if target == found[0] and own[0] >= 2 and target != found[1]:
                problems.append(f"{os.path.relpath(path, root)}: includes {name} beside it; "
                                f"name it by its room: \"{os.path.relpath(target, host)}\"")
            theirs = layer(target)
            if theirs and theirs[0] > own[0]:
                problems.append(f"{os.path.relpath(path, root)}: includes {name} "
                                f"({theirs[1]}, above its own layer {own[1]})")
    for p in problems:
        print(p)
    print(f"include_layers: {len(problems)} include(s) running back up or unnamed" if problems else
          f"include_layers: no include runs back up ({order})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")))

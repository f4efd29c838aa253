#!/usr/bin/env python3
"""The house as `ls` and docs/architecture.md promise it (issue 22), checked.

Each check reads the source tree only (no build, no processes):
- no program folder includes another program's headers, and bench/ uses the
  node library, not a program's files;
- the coordinator's files call down the order coordinator/coord.h lists,
  never up, and docs/architecture.md lists the same files in the same order;
- coord.h, the types hub, declares no function;
- one YAML reader: only one file drives libyaml's parser;
- no source file grows past MAX_LINES (spec.c was 3,500);
- the README's Layout table names every top-level folder and only those.
"""
import os
import re
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = ("coordinator", "worker", "device-runner", "cli")
MAX_LINES = 2000


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def strip_c(src):
    """src without comments and string literals (so prose naming a function is no call)."""
    out, i, n = [], 0, len(src)
    while i < n:
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif src[i] in "\"'":
            q, j = src[i], i + 1
            while j < n and src[j] != q:
                j += 2 if src[j] == "\\" else 1
            out.append(q + q)
            i = j + 1
        else:
            out.append(src[i])
            i += 1
    return "".join(out)


def sources(ext=(".c", ".h")):
    """Tracked-looking source files: every .c/.h outside build trees and hidden dirs."""
    for top in sorted(os.listdir(ROOT)):
        if top.startswith((".", "build")) or not os.path.isdir(os.path.join(ROOT, top)):
            continue
        for d, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [x for x in dirs if not x.startswith((".", "build"))]
            for f in files:
                if f.endswith(ext):
                    yield os.path.relpath(os.path.join(d, f), ROOT)


def top_of(path):
    return path.split(os.sep)[0]


class Layout(unittest.TestCase):
    def test_no_program_includes_another_programs_headers(self):
        owners = {}
        for h in sources((".h",)):
            owners.setdefault(os.path.basename(h), set()).add(top_of(h))
        bad = []
        for f in sources():
            top = top_of(f)
            if top not in PROGRAMS + ("bench",):
                continue
            for m in re.finditer(r'#include "([^"]+)"', read(f)):
                own = owners.get(os.path.basename(m.group(1)), set())
                if top in own:
                    continue
                others = own & set(PROGRAMS)
                if others:
                    bad.append(f"{f} includes {m.group(1)} of {', '.join(sorted(others))}/")
        self.assertEqual(bad, [], "a program (or bench/) built on another program's files: "
                         "move what they share into common/ or node/")

    def test_no_program_links_another_programs_library(self):
        libs = {}  # library target -> folder
        for top in PROGRAMS:
            for m in re.finditer(r"add_library\((\w+)", read(f"{top}/CMakeLists.txt")):
                libs[m.group(1)] = top
        bad = []
        for top in PROGRAMS + ("bench",):
            cm = read(f"{top}/CMakeLists.txt")
            for m in re.finditer(r"target_link_libraries\(([\w-]+)([^)]*)\)", cm):
                for lib in m.group(2).split():
                    if lib in libs and libs[lib] != top:
                        bad.append(f"{top}/CMakeLists.txt: {m.group(1)} links {lib} ({libs[lib]}/)")
        self.assertEqual(bad, [])

    def coord_order(self):
        head = read("coordinator/coord.h")
        block = head[: head.index("#ifndef")]
        return re.findall(r"^//   ([a-z_]+\.c)\s", block, re.M)

    def test_coordinator_calls_go_down(self):
        order = self.coord_order()
        lib = re.search(r"add_library\(cgq_coord STATIC([^)]*)\)", read("coordinator/CMakeLists.txt"))
        self.assertEqual(sorted(order), sorted(lib.group(1).split() + ["main.c"]),
                         "coord.h's list and the library's sources differ")
        defs, text = {}, {}
        for f in order:
            src = strip_c(read(f"coordinator/{f}"))
            text[f] = src
            for m in re.finditer(r"^([a-z][a-z0-9_]*) \(", src, re.M):
                if m.group(1) != "main":
                    defs[m.group(1)] = f
        up = []
        for f in order:
            for name, owner in defs.items():
                if owner != f and order.index(owner) < order.index(f) and \
                        re.search(r"\b%s\b" % name, text[f]):
                    up.append(f"{f} calls {name} of {owner}, above it")
        self.assertEqual(up, [])

    def test_architecture_lists_the_coordinator_in_order(self):
        arch = read("docs/architecture.md")
        sec = arch[arch.index("## Inside the coordinator"):]
        sec = sec[: sec.index("\n## ", 5)]
        listed = re.findall(r"^\| `([a-z_]+\.c)` \|", sec, re.M)
        self.assertEqual(listed, self.coord_order())

    def test_coord_h_is_types_only(self):
        src = strip_c(read("coordinator/coord.h"))
        protos = re.findall(r"^[a-z][\w \*]*?\b([a-z_][a-z0-9_]*) \([^;{]*\);", src, re.M)
        self.assertEqual(protos, [], "coord.h declares functions: their files' headers should")

    def test_one_yaml_reader(self):
        users = sorted(f for f in sources((".c",)) if "yaml_parser_initialize" in read(f)
                       and not f.startswith("tests/"))
        self.assertEqual(len(users), 1, f"files that drive libyaml's parser: {users}")

    def test_no_source_file_past_the_limit(self):
        big = []
        for f in sources((".c",)):
            if f.endswith("_test.c") or f.startswith("tests/"):
                continue
            n = read(f).count("\n")
            if n > MAX_LINES:
                big.append(f"{f}: {n} lines")
        self.assertEqual(big, [], f"split these along their parts (limit {MAX_LINES})")

    def test_readme_layout_matches_the_tree(self):
        readme = read("README.md")
        sec = readme[readme.index("## Layout"):]
        sec = sec[: sec.index("\n## ", 5)] if "\n## " in sec[5:] else sec
        listed = set(re.findall(r"^\| `([\w.-]+)/`", sec, re.M))
        tree = {d for d in os.listdir(ROOT) if os.path.isdir(os.path.join(ROOT, d))
                and not d.startswith((".", "build"))}
        tree = {d for d in tree if os.listdir(os.path.join(ROOT, d))}
        self.assertEqual(sorted(tree - listed), [], "folders the README's Layout does not name")
        self.assertEqual(sorted(listed - tree), [], "folders the README's Layout names that are gone")


class StripC(unittest.TestCase):
    # The checks above are only as good as this: a name in prose is no call.
    def test_comments_and_strings_go(self):
        src = 'a (); // b ()\n/* c () */ x = "d ()"; e (\'"\');'
        out = strip_c(src)
        for gone in ("b ()", "c ()", "d ()"):
            self.assertNotIn(gone, out)
        self.assertIn("a ()", out)
        self.assertIn("e (", out)


if __name__ == "__main__":
    sys.exit(0 if unittest.main(exit=False, verbosity=2).result.wasSuccessful() else 1)

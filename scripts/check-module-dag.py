#!/usr/bin/env python3
"""Fail when the modules of a crate import each other in a circle.

Every crate under crates/ must have modules that form a DAG (issue 13): a
module may use its children, its siblings or its parent, but never so that
following the uses leads back to where it started. Cargo already forbids
cycles between crates; this checks inside each crate.

A node is a module that has its own file (`src/a.rs` or `src/a/mod.rs` is
`a`, `src/a/b.rs` is `a::b`); inline modules (`mod tests { .. }`) belong to
their file. An edge A -> B is any path in A's code that names B or an item in
B: `crate::b::..`, `super::..`, `self::..`, or a child module's name used
relatively (`use clock::Ev`), with `use` trees expanded. Declaring a child
(`mod b;`) is not an edge. Comments and string literals are ignored.

Usage: check-module-dag.py [ROOT]   (default: the repository's crates/)
Runs its own self-test first (a synthetic cycle must be found, a DAG with a
`use super::*` test module must pass). Exit status 1 on a cycle.
"""

import os
import re
import sys
import tempfile

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip_code(text):
    """Replace comments, string and char literals with spaces (keeps offsets' lines)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:])) and (i == 0 or not re.match(r"\w", text[i - 1])):
            end = '"' + m.group(1)
            j = text.find(end, i + len(m.group(0)))
            j = n if j < 0 else j + len(end)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", text[i : j + 1]))
            i = j + 1
        elif c == "'" and (m := re.match(r"'(\\.|\\u\{[0-9a-fA-F]+\}|\\x[0-9a-fA-F]{2}|[^\\'])'", text[i:])):
            out.append(" " * len(m.group(0)))
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_use_tree(tree):
    """`a::{b, c::{d as e}}` -> [([a, b], b), ([a, c, d], e)]: each leaf path and the name it binds
    (`self` in a group binds the group's prefix)."""

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            depth += (ch == "{") - (ch == "}")
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        return [p.strip() for p in parts + [cur] if p.strip()]

    def parse(s):
        out = []
        for p in split_top(s):
            if "{" in p:
                i = p.index("{")
                prefix = [x for x in re.sub(r"\s+", "", p[:i]).split("::") if x]
                for segs, alias in parse(p[i + 1 : p.rindex("}")]):
                    if segs == ["self"]:
                        out.append((prefix, alias if alias != "self" else (prefix or [""])[-1]))
                    else:
                        out.append((prefix + segs, alias))
            else:
                m = re.match(r"^(.*?)\s+as\s+(" + IDENT + r")$", p, re.S)
                path, alias = (m.group(1), m.group(2)) if m else (p, None)
                segs = [x for x in re.sub(r"\s+", "", path).split("::") if x]
                out.append((segs, alias or (segs[-1] if segs else "")))
        return out

    return parse(tree)


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path (tuple) -> file
        for dirpath, _, names in os.walk(src):
            for name in names:
                if not name.endswith(".rs"):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, src)[:-3].split(os.sep)
                if rel in (["lib"], ["main"]):
                    mod = ()
                elif rel[-1] == "mod":
                    mod = tuple(rel[:-1])
                else:
                    mod = tuple(rel)
                if rel[0] == "bin" or (mod in self.files and rel in (["main"],)):
                    continue
                self.files[mod] = full

    def node_of(self, path):
        """The longest module with its own file that is a prefix of `path`."""
        path = tuple(path)
        for k in range(len(path), -1, -1):
            if path[:k] in self.files:
                return path[:k]
        return None

    def children(self, mod):
        return {m[-1] for m in self.files if len(m) == len(mod) + 1 and m[: len(mod)] == mod}

    def resolve(self, cur, segs):
        """Absolute module path named by `segs` used in module `cur` (None: not this crate's)."""
        if not segs:
            return None
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] in ("self", "super"):
            base = list(cur)
            i = 0
            while i < len(segs) and segs[i] in ("self", "super"):
                if segs[i] == "super":
                    if not base:
                        return None
                    base.pop()
                i += 1
            return base + segs[i:]
        if segs[0] in self.inline.get(tuple(cur), set()) | self.children(tuple(cur)):
            return list(cur) + segs
        return None

    def scan(self, mod, file, on_use, on_path):
        """Walk a file's code: `on_use(cur, use_text, is_pub)` for each `use`, `on_path(cur, segs)`
        for each other `a::b` path, with `cur` the (inline) module it is in."""
        code = strip_code(open(file, encoding="utf-8").read())
        frames, depth = [], 0
        pattern = (
            r"\{|\}|\bmod\s+(" + IDENT + r")\s*\{|(\bpub(?:\([^)]*\))?\s+)?\buse\s+([^;]+);|(?:\b"
            + IDENT + r"::)+" + IDENT
        )
        for m in re.finditer(pattern, code):
            t = m.group(0)
            cur = tuple(list(mod) + [f[0] for f in frames])
            if t == "{":
                depth += 1
            elif t == "}":
                depth -= 1
                if frames and frames[-1][1] == depth:
                    frames.pop()
            elif m.group(1):
                self.inline.setdefault(cur, set()).add(m.group(1))
                frames.append((m.group(1), depth))
                depth += 1
            elif m.group(3):
                on_use(cur, m.group(3), bool(m.group(2)))
            else:
                on_path(cur, t.split("::"))

    def target(self, cur, segs):
        """The file module that the item named by `segs` in `cur` is defined in, following
        re-exports (`pub use a::X;` makes `crate::X` mean `a::X`); None: not this crate's."""
        path = self.resolve(cur, [x for x in segs if x != "*"])
        for _ in range(16):
            if path is None:
                return None
            node = self.node_of(path)
            rest = path[len(node) :]
            if rest and rest[0] in self.reexports.get(node, {}):
                path = self.reexports[node][rest[0]] + rest[1:]
                continue
            return node
        return None

    def edges(self):
        self.inline, self.reexports = {}, {}
        # pass 1: re-exports at each file module's top level
        for mod, file in self.files.items():

            def on_use(cur, text, is_pub, mod=mod):
                if is_pub and cur == mod:
                    for segs, alias in expand_use_tree(text):
                        path = self.resolve(cur, segs)
                        if path is not None and alias not in ("*", "self"):
                            self.reexports.setdefault(mod, {})[alias] = path

            self.scan(mod, file, on_use, lambda cur, segs: None)
        # pass 2: edges
        out = {m: set() for m in self.files}
        for mod, file in self.files.items():

            def add(cur, segs, mod=mod):
                node = self.target(cur, segs)
                if node is not None and node != mod:
                    out[mod].add(node)

            def on_use(cur, text, is_pub, add=add):
                for segs, _ in expand_use_tree(text):
                    add(cur, segs)

            self.scan(mod, file, on_use, add)
        return out


def find_cycle(graph):
    """A cycle as a list of nodes (first == last), or None."""
    color, stack = {}, []

    def dfs(v):
        color[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if color.get(w) == 1:
                return stack[stack.index(w) :] + [w]
            if not color.get(w):
                c = dfs(w)
                if c:
                    return c
        stack.pop()
        color[v] = 2
        return None

    for v in sorted(graph):
        if not color.get(v):
            c = dfs(v)
            if c:
                return c
    return None


def name(mod):
    return "crate" if not mod else "crate::" + "::".join(mod)


def check(root, quiet=False):
    bad = 0
    crates = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d, "src")))
    for c in crates:
        crate = Crate(os.path.join(root, c, "src"))
        cyc = find_cycle(crate.edges())
        if cyc:
            bad += 1
            if not quiet:
                print(f"{c}: module import cycle: {' -> '.join(name(m) for m in cyc)}", file=sys.stderr)
    return bad, len(crates)


def self_test():
    def crate(files):
        d = tempfile.mkdtemp()
        for rel, text in files.items():
            p = os.path.join(d, "k", "src", rel)
            os.makedirs(os.path.dirname(p), exist_ok=True)
            open(p, "w").write(text)
        return d

    def edges(d):
        return Crate(os.path.join(d, "k", "src")).edges()

    cyc = crate(
        {
            "lib.rs": "mod a;\nmod b;\n",
            "a.rs": "use crate::b::Thing;\n",
            "b/mod.rs": "mod c;\n",
            "b/c.rs": "// use crate::z;\nfn f() { let s = \"crate::q\"; super::super::a::g(); }\n",
        }
    )
    e = edges(cyc)
    assert e[("a",)] == {("b",)} and e[("b", "c")] == {("a",)}, e
    assert find_cycle(e) is None, "b does not use c yet: no cycle"
    open(os.path.join(cyc, "k", "src", "b", "mod.rs"), "w").write("mod c;\nuse c::{self as cc, X};\n")
    assert find_cycle(edges(cyc)) == [("a",), ("b",), ("b", "c"), ("a",)], edges(cyc)
    dag = crate(
        {
            "lib.rs": "pub mod top;\npub mod low;\npub use low::L as Low;\n",
            "low.rs": "pub struct L;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use crate::low::L;\n}\n",
            "top/mod.rs": "mod part;\nuse crate::{low::{self, L}};\nuse part::P;\n",
            "top/part.rs": "use super::super::Low;\npub struct P;\n",
        }
    )
    e = edges(dag)
    # a test module's `use super::*` is its own file; `crate::Low` is a re-export of low::L
    assert e == {(): {("low",)}, ("low",): set(), ("top",): {("low",), ("top", "part")}, ("top", "part"): {("low",)}}, e
    assert check(dag, quiet=True)[0] == 0
    # an item defined at the root (not re-exported) used by a module the root re-exports from
    open(os.path.join(dag, "k", "src", "low.rs"), "w").write("pub struct L(crate::Err);\n")
    open(os.path.join(dag, "k", "src", "lib.rs"), "a").write("pub struct Err;\n")
    assert check(dag, quiet=True)[0] == 1, edges(dag)


def main():
    self_test()
    here = os.path.dirname(os.path.abspath(__file__))
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "crates")
    bad, n = check(root)
    if bad:
        sys.exit(1)
    print(f"module graphs of {n} crates are DAGs")


if __name__ == "__main__":
    main()

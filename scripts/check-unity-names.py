#!/usr/bin/env python3
"""Checks that the source files of each unity batch (cmake/unity_build.cmake) can share one
translation unit safely: no two files of a target give a file-local name (anonymous namespace,
`static`, a using-declaration or an alias there, a macro left defined) to different things.
Which files share a batch depends on the configuring machine's cores, so files of a target that
share no batch here are checked too: they may share one on another machine.

The compiler rejects only some such pairs (a redefinition); others compile and silently change
what a call means (an overload of the same name from an earlier file is a better match). So
every name that two files of a target declare file-locally is reported, whatever the compiler
says. Rename one, or list the file in its target's KILN_UNITY_SKIP (SKIP_UNITY_BUILD_INCLUSION).

Usage: check-unity-names.py BUILD_DIR    (exit 1 with the list when two files of a target share a name)
"""
import pathlib
import re
import sys

INCLUDE = re.compile(r'#include\s+"([^"]+)"')
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "decltype", "alignof",
            "static_assert", "operator", "noexcept", "requires", "throw", "new", "delete"}


def strip(text):
    """The text without comments, string and character literals (same line breaks)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def declared_name(head):
    """The name a declaration introduces (head: its text up to '{' or ';'), or None."""
    head = " ".join(head.split())
    head = re.sub(r"^template\s*<.*?>\s*", "", head)
    head = re.sub(r"\[\[[^\]]*\]\]\s*", "", head)
    if not head or head.startswith(("using namespace", "namespace", "extern ", "friend ")):
        return None
    if not re.match(r"[A-Za-z_:]", head):
        return None  # the rest of an expression (`->ArgsProduct({...})` after a macro's use)
    m = re.match(r"(?:struct|class|union|enum(?:\s+class)?)\s+(\w+)", head)
    if m:
        return m.group(1)
    m = re.match(r"using\s+(\w+)\s*=\s*(.*)$", head)
    if m:  # an alias: two of the same type are harmless, so name the type
        return m.group(1) + " = " + m.group(2)
    m = re.match(r"using\s+([\w:]*::(\w+))$", head)
    if m:  # a using-declaration: two of the same entity are harmless, so name the entity
        return m.group(2) + " = " + re.sub(r"^(::)?(kiln::)?", "", m.group(1))
    # A function: the identifier before the first '(' at the top level of the head.
    depth = 0
    for k, c in enumerate(head):
        if c == "<":
            depth += 1
        elif c == ">":
            depth = max(0, depth - 1)
        elif c == "(" and depth == 0:
            m = re.search(r"(\w+)\s*$", head[:k])
            if m and m.group(1) not in KEYWORDS and "=" not in head[:k]:
                if re.fullmatch(r"[A-Z][A-Z0-9_]*", m.group(1)) and m.start(1) == 0:
                    return None  # a macro's use (TEST(...) {), not a declaration
                return m.group(1)
            break
    m = re.search(r"([A-Za-z_]\w*)\s*(?:\[\s*\w*\s*\]\s*)?(?:=|$)", head.split("=")[0] + ("=" if "=" in head else ""))
    if m and m.group(1) not in KEYWORDS and " " in head.split("=")[0].strip():
        return m.group(1)
    return None


def more_declarators(head):
    """The names a variable declaration introduces after its first (`int a = 1, b = 2;`): the
    identifiers that follow a comma at the top level of its head."""
    names, depth = [], 0
    for k, c in enumerate(head):
        if c in "(<[{":
            depth += 1
        elif c in ")>]}":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            m = re.match(r"\s*\**\s*([A-Za-z_]\w*)\s*(?:=|\[|\{|,|$)", head[k + 1:])
            if m and m.group(1) not in KEYWORDS:
                names.append(m.group(1))
    return names


def scope(stack):
    """The enclosing named namespaces as a prefix ("kiln::runtime::")."""
    return "".join(s + "::" for s in stack if s not in ("anon", "block"))


def file_local_names(path):
    """{name: line} declared with internal linkage at namespace scope, plus leaked macros."""
    raw = path.read_text(errors="replace")
    text = strip(raw)
    names = {}
    defined = {}
    for no, line in enumerate(text.split("\n"), 1):
        m = re.match(r"\s*#\s*define\s+(\w+)", line)
        if m:
            defined[m.group(1)] = no
        m = re.match(r"\s*#\s*undef\s+(\w+)", line)
        if m:
            defined.pop(m.group(1), None)
    for name, no in defined.items():
        if not re.fullmatch(r"KILN_\w+_H|NDEBUG", name):
            names["macro " + name] = no
    text = "\n".join("" if l.lstrip().startswith("#") else l for l in text.split("\n"))
    stack = []  # "anon", "block" or the name of a named namespace
    head_start, i, line = 0, 0, 1
    while i < len(text):
        c = text[i]
        if c == "\n":
            line += 1
        if c in "{;}":
            head = text[head_start:i]
            at_namespace_scope = all(s != "block" for s in stack)
            local = at_namespace_scope and (
                "anon" in stack or re.match(r"\s*(?:template\s*<.*?>\s*)?static\b", head, re.S))
            if c == "{":
                ns = re.search(r"namespace\s*([\w:]*)\s*$", head)
                if ns is not None and at_namespace_scope:
                    stack.append(ns.group(1) or "anon")
                else:
                    if local:  # a definition, or a variable's brace initializer (= {...})
                        name = declared_name(head)
                        if name:
                            names.setdefault(scope(stack) + name, line)
                    stack.append("block")
            elif c == ";" and local:
                name = declared_name(head)
                if name:
                    names.setdefault(scope(stack) + name, line)
                    if " = " not in name and "(" not in head.split("=")[0]:
                        for more in more_declarators(head):
                            names.setdefault(scope(stack) + more, line)
            elif c == "}" and stack:
                stack.pop()
            head_start = i + 1
        i += 1
    return names


def main():
    build = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "build")
    batches = sorted(build.glob("**/Unity/unity_*_cxx.cxx"))
    ninja = build / "build.ninja"
    if ninja.exists():  # only the batches the build compiles (a target may have left unity)
        used = set(re.findall(r"(\S*Unity/unity_\d+_cxx\.cxx)", ninja.read_text()))
        batches = [b for b in batches if str(b) in used or str(b.relative_to(build)) in used]
    if not batches:
        print(f"check-unity-names: no unity batches under {build} (KILN_UNITY_BUILD=OFF?)")
        return 0
    # Which files share a batch depends on the batch size, which depends on the configuring
    # machine's cores (cmake/unity_build.cmake): any two files of a target may share one on
    # some machine, so every file of a target is checked against every other.
    targets = {}
    for batch in batches:
        targets.setdefault(batch.parent, []).extend(
            pathlib.Path(p) for p in INCLUDE.findall(batch.read_text()))
    clashes = []
    for unity_dir, sources in sorted(targets.items()):
        seen = {}
        for src in sources:
            for name, no in file_local_names(src).items():
                seen.setdefault(name, []).append(f"{src}:{no}")
        by_name = {}
        for key, where in seen.items():
            by_name.setdefault(key.split(" = ")[0], set()).add(key)
        for base, keys in sorted(by_name.items()):
            where = [w for k in sorted(keys) for w in seen[k]]
            if len(keys) > 1 or (" = " not in next(iter(keys)) and len(where) > 1):
                clashes.append(f"{unity_dir.parent.relative_to(build)}: {base}: " + ", ".join(where))
    for c in clashes:
        print(c)
    print(f"check-unity-names: {len(targets)} targets in {len(batches)} batches, "
          f"{len(clashes)} shared file-local names")
    return 1 if clashes else 0


if __name__ == "__main__":
    sys.exit(main())

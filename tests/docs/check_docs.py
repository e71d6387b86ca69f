#!/usr/bin/env python3
"""Checks that the docs stay true to the tree (issue 36). Standard library only; no network.

  check_docs.py links SOURCE_DIR
      Every relative link and every #anchor in README.md, docs/*.md and the other tracked
      *.md files resolves: the file or folder exists, and an anchor names a heading of the
      target page (GitHub's slugs). External links (http:, https:, mailto:) are not checked.
  check_docs.py flags SOURCE_DIR CLI
      Every `corridorkey-engine SUB ...` command line in the README's "Quick start" names
      only long flags (--xyz) that `CLI SUB --help` lists. CLI is the built binary.
  check_docs.py tracked SOURCE_DIR [--files-from LIST]
      git tracks no clip-like output: no path with an Output/, Input/ or AlphaHint/ folder
      outside samples/ and tests/ (the sample clip and test fixtures). LIST (one path a line)
      replaces `git ls-files`, to check a list by hand.

Each mode prints one "FAIL: ..." line per problem, and when there is none one line that
ctest matches: "docs links: ok", "quick start flags: ok", "tracked outputs: ok". Exit 0 ok, 1 a problem, 2 usage, 77 skipped (not a git checkout).
"""
import os
import re
import shlex
import subprocess
import sys
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
# [text](target "title") and ![alt](target); the text may hold one level of [brackets].
INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*(<[^>]*>|[^)\s]*)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ID = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# Folders the tools write clips and outputs into; allowed only under these prefixes.
CLIP_FOLDERS = {"Output", "Input", "AlphaHint"}
CLIP_ALLOWED = ("samples/", "tests/")
SKIP_DIRS = {".git", "__pycache__", "gpu-check", "Output", "node_modules"}


def fail(problems, msg):
    problems.append(msg)
    print("FAIL: " + msg)


def strip_code_spans(line):
    """The line with inline code spans (`...`, ``...``) blanked: links in code are not links."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "`":
            j = i
            while j < len(line) and line[j] == "`":
                j += 1
            ticks = line[i:j]
            end = line.find(ticks, j)
            if end < 0:
                out.append(line[i:j])
                i = j
                continue
            out.append(re.sub(r"[^\n]", " ", line[i:end + len(ticks)]))
            i = end + len(ticks)
        else:
            out.append(line[i])
            i += 1
    return "".join(out)


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for n, line in enumerate(text.splitlines(), 1):
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):].strip():
                fence = None
            continue
        if m:
            fence = m.group(1)
            continue
        yield n, line


def heading_text(raw):
    """The rendered text of a heading: links and images by their text, markup left for slug()."""
    raw = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", raw)
    return re.sub(r"<[^>]+>", "", raw)


def slug(text):
    """GitHub's anchor for a heading: lowercase, punctuation but - and _ dropped, spaces -> -."""
    text = heading_text(text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text):
    """Every anchor a page defines: heading slugs (repeats get -1, -2, ...) and <a name/id>."""
    seen, out = {}, set()
    for _, line in prose_lines(text):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(2))
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.add(base if k == 0 else "%s-%d" % (base, k))
        out.update(HTML_ID.findall(line))
    return out


def paragraphs(text):
    """(first line number, text) of each paragraph outside fenced code: a link's text and a
    code span may run over several lines of one paragraph, never past a blank line."""
    block, start, last = [], None, None
    for n, line in prose_lines(text):
        if not line.strip() or (last is not None and n != last + 1):
            if block:
                yield start, "\n".join(block)
            block, start = [], None
        if line.strip():
            if start is None:
                start = n
            block.append(line)
        last = n
    if block:
        yield start, "\n".join(block)


def links(text):
    """(line number, target) of every link outside code."""
    for start, para in paragraphs(text):
        for k, line in enumerate(para.split("\n")):
            m = REF_DEF.match(line)
            if m:
                yield start + k, m.group(1)
        for m in INLINE_LINK.finditer(strip_code_spans(para)):
            yield start + para.count("\n", 0, m.start()), m.group(1)


def git_files(src):
    """The tracked files (relative paths), or None when src is not a git checkout."""
    try:
        r = subprocess.run(["git", "-C", src, "ls-files", "-z"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        print("git ls-files: %s" % e)
        return None
    if r.returncode != 0:
        print("git ls-files: " + r.stderr.decode(errors="replace").strip())
        return None
    return [p for p in r.stdout.decode(errors="surrogateescape").split("\0") if p]


def markdown_files(src):
    """README.md, docs/*.md and every other tracked *.md (walking the tree without git)."""
    found = set()
    files = git_files(src)
    if files is None:
        for root, dirs, names in os.walk(src):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(("build", "."))]
            found.update(os.path.relpath(os.path.join(root, f), src) for f in names if f.endswith(".md"))
    else:
        found.update(p for p in files if p.endswith(".md") and os.path.isfile(os.path.join(src, p)))
    # New pages count before they are committed.
    found.add("README.md")
    docs = os.path.join(src, "docs")
    if os.path.isdir(docs):
        found.update("docs/" + f for f in os.listdir(docs) if f.endswith(".md"))
    return sorted(found)


def check_links(src):
    problems, count = [], 0
    pages = markdown_files(src)
    cache = {}

    def page_anchors(path):
        if path not in cache:
            with open(path, encoding="utf-8") as f:
                cache[path] = anchors(f.read())
        return cache[path]

    for rel in pages:
        path = os.path.join(src, rel)
        if not os.path.isfile(path):
            fail(problems, "%s: missing" % rel)
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for n, target in links(text):
            target = target[1:-1] if target.startswith("<") else target
            if not target or SCHEME.match(target):
                continue  # external (http, https, mailto): not checked, no network
            count += 1
            where = "%s:%d: %s" % (rel, n, target)
            file_part, _, anchor = target.partition("#")
            file_part = urllib.parse.unquote(file_part)
            if file_part.startswith("/"):
                dest = os.path.join(src, file_part.lstrip("/"))
            elif file_part:
                dest = os.path.join(os.path.dirname(path), file_part)
            else:
                dest = path
            dest = os.path.normpath(dest)
            if not os.path.exists(dest):
                fail(problems, "%s: no such file or folder" % where)
                continue
            if anchor and dest.endswith(".md") and os.path.isfile(dest):
                if urllib.parse.unquote(anchor) not in page_anchors(dest):
                    fail(problems, "%s: no heading with anchor #%s in %s" % (where, anchor, os.path.relpath(dest, src)))
    if not problems:
        print("docs links: ok (%d pages, %d relative links)" % (len(pages), count))
    return 1 if problems else 0


def section(text, title):
    """The lines of the section whose heading contains `title`, up to the next heading of its
    level or above (None when there is none). Fence lines are kept: quick_start_commands()
    reads the blocks; a `#` inside a block is a shell comment, not a heading."""
    lines, out, level = text.splitlines(), None, None
    fence = None
    for line in lines:
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0]:
                fence = None
        elif m:
            fence = m.group(1)
        h = None if fence or m else HEADING.match(line)
        if out is not None:
            if h and len(h.group(1)) <= level:
                break
            out.append(line)
        elif h and title.lower() in h.group(2).lower():
            out, level = [], len(h.group(1))
    return out


def quick_start_commands(text):
    """Shell command lines (continuations joined) in the fenced blocks of the Quick start."""
    lines = section(text, "Quick start")
    if lines is None:
        return None
    cmds, fence, pending = [], None, ""
    for line in lines:
        m = FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0]:
                fence = None
                continue
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            cmds.append(pending + line)
            pending = ""
        elif m:
            fence = m.group(1)
    return cmds


def run_help(cli, path):
    r = subprocess.run([cli] + path + ["--help"], capture_output=True, text=True, timeout=120)
    return r.returncode, r.stdout + r.stderr


def subcommands(help_text):
    """Names listed under CLI11's "Subcommands:" heading."""
    m = re.search(r"^subcommands:\s*$(.*?)(?:^\S|\Z)", help_text, re.I | re.M | re.S)
    return set(re.findall(r"^\s+([a-z][\w-]*)", m.group(1), re.M)) if m else set()


def check_flags(src, cli):
    problems, checked = [], 0
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        cmds = quick_start_commands(f.read())
    if cmds is None:
        fail(problems, "README.md has no \"Quick start\" section")
        return 1
    helps = {}
    for cmd in cmds:
        try:
            words = shlex.split(cmd, comments=True)
        except ValueError as e:
            fail(problems, "README.md quick start: cannot split %r: %s" % (cmd, e))
            continue
        for i, w in enumerate(words):
            if os.path.basename(w) != "corridorkey-engine":
                continue
            rest = words[i + 1:]
            if not rest or rest[0].startswith("-"):
                break
            path = [rest[0]]
            j = 1
            while True:  # nested subcommands: job run, profiles show
                key = tuple(path)
                if key not in helps:
                    helps[key] = run_help(cli, path)
                rc, text = helps[key]
                if rc != 0:
                    fail(problems, "`corridorkey-engine %s --help` exited %d: %s" % (" ".join(path), rc, text.strip()[:200]))
                    break
                if j < len(rest) and not rest[j].startswith("-") and rest[j] in subcommands(text):
                    path.append(rest[j])
                    j += 1
                    continue
                break
            if rc != 0:
                break
            checked += 1
            for flag in (w.split("=", 1)[0] for w in rest if w.startswith("--") and len(w) > 2):
                if not re.search(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])", text):
                    fail(problems, "README.md quick start: `corridorkey-engine %s` has no flag %s in its --help"
                         % (" ".join(path), flag))
            break
    if checked == 0 and not problems:
        fail(problems, "README.md quick start runs no `corridorkey-engine SUB ...` command")
    if not problems:
        print("quick start flags: ok (%d commands checked against --help)" % checked)
    return 1 if problems else 0


def check_tracked(src, files_from=None):
    if files_from:
        with open(files_from, encoding="utf-8", errors="surrogateescape") as f:
            files = [l.rstrip("\n") for l in f if l.strip()]
    else:
        files = git_files(src)
        if files is None:
            print("skipped: not a git checkout (%s)" % src)
            return 77
    problems = []
    for p in files:
        folders = p.split("/")[:-1]
        if CLIP_FOLDERS.intersection(folders) and not p.startswith(CLIP_ALLOWED):
            fail(problems, "tracked clip-like path outside %s: %s" % (" and ".join(CLIP_ALLOWED), p))
    if problems:
        print("%d such path(s): outputs belong in <clip>/Output/ outside git "
              "(git rm -r --cached PATH; .gitignore covers the default folders)" % len(problems))
    else:
        print("tracked outputs: ok (%d tracked paths, none in Output/, Input/ or AlphaHint/ outside %s)"
              % (len(files), ", ".join(CLIP_ALLOWED)))
    return 1 if problems else 0


def main(argv):
    if len(argv) == 2 and argv[0] == "links":
        return check_links(argv[1])
    if len(argv) == 3 and argv[0] == "flags":
        return check_flags(argv[1], argv[2])
    if argv[:1] == ["tracked"] and len(argv) in (2, 4) and (len(argv) == 2 or argv[2] == "--files-from"):
        return check_tracked(argv[1], argv[3] if len(argv) == 4 else None)
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Turns reStructuredText sources (such as the Python documentation that
Debian's python3.11-doc ships) into a corpus in WikiExtractor's form, which
`packed-bert prepare` reads: one <doc> per section, its title on the first
line, then its prose paragraphs, one per line. Markup, code blocks,
directives and tables are dropped; inline roles keep their text. A
document is a file's part under one of its two outermost heading levels
(chapter and section), so that document lengths vary as Wikipedia
articles' do.

Every 20th document goes to HELD_OUT instead, for an eval set that the
training data does not contain.

usage: rst_corpus.py OUT_FILE HELD_OUT_FILE SOURCE_DIR [SOURCE_DIR ...]
"""
import os
import re
import sys

HEADING_UNDERLINE = re.compile(r"^([=\-~^*+#\"'`:.])\1{2,}\s*$")
ROLE = re.compile(r":[\w:.-]+:`!?~?([^`<]*?)(?:\s*<[^>]*>)?`")
LITERAL = re.compile(r"``([^`]+)``")
LINK = re.compile(r"`([^`<]+?)\s*(?:<[^>]*>)?`_{1,2}")
EMPHASIS = re.compile(r"\*{1,2}([^*]+)\*{1,2}")
SUBSTITUTION = re.compile(r"\|[^|]+\|")


def inline(text):
    text = ROLE.sub(r"\1", text)
    text = LITERAL.sub(r"\1", text)
    text = LINK.sub(r"\1", text)
    text = EMPHASIS.sub(r"\1", text)
    text = SUBSTITUTION.sub("", text)
    text = text.replace("\\", "")
    return " ".join(text.split())


def sections(path):
    """(title, [paragraph, ...]) for each section of one file."""
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().split("\n")
    title, paragraphs, current = os.path.basename(path), [], []
    skip_indented = False  # inside a directive or a literal block
    styles = []  # heading styles in order of first use: their levels

    def flush():
        if current:
            text = inline(" ".join(current))
            # Prose: a few words ending like a sentence.
            if len(text.split()) >= 4 and text[-1:] in ".!?:)\"'":
                paragraphs.append(text)
            current.clear()

    i = 0
    while i < len(lines):
        line = lines[i].rstrip()
        nxt = lines[i + 1].rstrip() if i + 1 < len(lines) else ""
        if skip_indented:
            if line and not line[0].isspace():
                skip_indented = False
            else:
                i += 1
                continue
        if not line:
            flush()
        elif HEADING_UNDERLINE.match(line) and not current:
            pass  # an overline
        elif nxt and HEADING_UNDERLINE.match(nxt) and len(nxt.strip()) >= len(line.strip()) - 2:
            flush()
            style = nxt.strip()[0]
            if style not in styles:
                styles.append(style)
            if styles.index(style) < 2:
                if paragraphs:
                    yield title, paragraphs
                title, paragraphs = inline(line.strip("*= ")), []
            i += 2
            continue
        elif line.startswith(".."):
            flush()
            skip_indented = True
        elif line[0].isspace() or line.lstrip().startswith(("+", "|", ">>>")):
            flush()
            skip_indented = True
        elif line.lstrip().startswith(("* ", "- ", "#. ")) and not current:
            current.append(line.lstrip()[2:])
        else:
            current.append(line.strip())
            if line.endswith("::"):
                current[-1] = line.strip()[:-1]
                flush()
                skip_indented = True
        i += 1
    flush()
    if paragraphs:
        yield title, paragraphs


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out_path, held_out_path, roots = sys.argv[1], sys.argv[2], sys.argv[3:]
    files = []
    for root in roots:
        for folder, _, names in os.walk(root):
            files += [os.path.join(folder, n) for n in names if n.endswith((".rst", ".rst.txt"))]
    if not files:
        sys.exit(f"rst_corpus.py: no .rst or .rst.txt files under {' '.join(roots)}")
    documents = 0
    with open(out_path + ".tmp", "w", encoding="utf-8") as out, \
            open(held_out_path + ".tmp", "w", encoding="utf-8") as held_out:
        for path in sorted(files):
            for title, paragraphs in sections(path):
                documents += 1
                f = held_out if documents % 20 == 0 else out
                f.write(f'<doc id="{documents}" url="file://{path}" title="{title}">\n')
                f.write(title + "\n\n" + "\n\n".join(paragraphs) + "\n</doc>\n")
    os.replace(out_path + ".tmp", out_path)
    os.replace(held_out_path + ".tmp", held_out_path)
    print(f"{out_path}, {held_out_path}: {documents} documents from {len(files)} files, "
          f"every 20th held out")


if __name__ == "__main__":
    main()

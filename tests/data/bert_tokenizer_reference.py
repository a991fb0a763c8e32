#!/usr/bin/python3
"""An independent BERT tokenizer for parity tests, written from the published
algorithm (Devlin et al., google-research/bert tokenization.py: clean text,
pad CJK characters, split on whitespace, lower-case and strip accents for
uncased vocabularies, split punctuation, then greedy longest-match-first
WordPiece with "##" continuations), using Python's unicodedata, so that it
shares no code and no Unicode library with the C++ tokenizer.

    bert_tokenizer_reference.py VOCAB [--cased] [--tokens] [--max-chars N] < lines > ids

Prints one line per input line: its ids (or, with --tokens, its pieces).
"""
import sys
import unicodedata

MAX_WORD_CHARS = 200  # tokenization.py's max_input_chars_per_word


def is_whitespace(c):
    return c in " \t\n\r" or unicodedata.category(c) == "Zs"


def is_control(c):
    if c in "\t\n\r":
        return False
    return unicodedata.category(c).startswith("C")


def is_punctuation(c):
    cp = ord(c)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(c).startswith("P")


def is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def basic_tokens(text, lower):
    cleaned = []
    for c in text:
        if ord(c) == 0 or ord(c) == 0xFFFD or is_control(c):
            continue
        cleaned.append(" " if is_whitespace(c) else c)
    spaced = []
    for c in "".join(cleaned):
        spaced.append(f" {c} " if is_cjk(ord(c)) else c)
    out = []
    for word in "".join(spaced).split():
        if lower:
            word = word.lower()
            word = "".join(c for c in unicodedata.normalize("NFD", word)
                           if unicodedata.category(c) != "Mn")
        piece = []
        for c in word:
            if is_punctuation(c):
                if piece:
                    out.append("".join(piece))
                    piece = []
                out.append(c)
            else:
                piece.append(c)
        if piece:
            out.append("".join(piece))
    return " ".join(out).split()


def wordpiece(word, vocab):
    if len(word) > MAX_WORD_CHARS:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end, found = len(word), None
        while start < end:
            candidate = ("##" if start > 0 else "") + word[start:end]
            if candidate in vocab:
                found = candidate
                break
            end -= 1
        if found is None:
            return ["[UNK]"]
        pieces.append(found)
        start = end
    return pieces


def main():
    vocab_path = sys.argv[1]
    lower = "--cased" not in sys.argv
    as_tokens = "--tokens" in sys.argv
    global MAX_WORD_CHARS
    if "--max-chars" in sys.argv:
        MAX_WORD_CHARS = int(sys.argv[sys.argv.index("--max-chars") + 1])
    vocab = {}
    with open(vocab_path, encoding="utf-8") as f:
        for i, line in enumerate(f):
            vocab.setdefault(line.strip(), i)
    data = sys.stdin.buffer.read().decode("utf-8", "ignore")
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out = []
    for line in lines:
        pieces = [p for w in basic_tokens(line, lower) for p in wordpiece(w, vocab)]
        out.append(" ".join(pieces if as_tokens else (str(vocab[p]) for p in pieces)))
    sys.stdout.write("\n".join(out) + ("\n" if out else ""))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Makes CoLA-format files (GLUE's acceptability task) from a corpus in
WikiExtractor's form (what `packed-bert prepare` reads), for a fine-tuning
run that needs nothing beside the checkout. A sentence of the corpus as
written is acceptable (label 1); the same kind of sentence with one word
replaced by a random whole word of the BERT vocabulary is not (label 0,
marked "*" as CoLA marks it). The two labels alternate, so that the
majority class is half of each file. Every fifth document goes to the dev
file, so that it holds other documents than the training file.

A model can tell the two apart only by knowing which words the corpus uses
where: what pretraining on that corpus teaches, and what fine-tuning from
random weights cannot learn from a few thousand sentences.

usage: acceptability_glue.py CORPUS VOCAB TRAIN_TSV DEV_TSV [--train N]
                             [--dev N] [--seed S]
"""
import argparse
import os
import random
import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def documents(path):
    """The paragraphs of each document, its title line left out."""
    paragraphs, title = None, None
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("<doc "):
                paragraphs, title = [], None
            elif line == "</doc>":
                if paragraphs is not None:
                    yield paragraphs
                paragraphs = None
            elif line and paragraphs is not None:
                if title is None:
                    title = line
                else:
                    paragraphs.append(line)


def sentences(paragraphs):
    """Prose sentences of 8 to 30 words, mostly words (not code)."""
    for paragraph in paragraphs:
        for sentence in SENTENCE_END.split(paragraph):
            words = sentence.split()
            if 8 <= len(words) <= 30 and sum(w.isalpha() for w in words) >= 0.7 * len(words):
                yield words


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("vocab", help="the BERT vocabulary: its whole words replace words")
    parser.add_argument("train")
    parser.add_argument("dev")
    parser.add_argument("--train-sentences", type=int, default=4000)
    parser.add_argument("--dev-sentences", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with open(args.vocab, encoding="utf-8") as f:
        words = [t.strip() for t in f]
    replacements = [w for w in words if w.isascii() and w.isalpha()]
    if len(replacements) < 1000:
        raise SystemExit(f"{args.vocab}: {len(replacements)} whole words; is it a BERT vocabulary?")
    rng = random.Random(args.seed)
    parts = ([], [])
    for d, paragraphs in enumerate(documents(args.corpus)):
        parts[1 if d % 5 == 4 else 0].extend(sentences(paragraphs))
    for part, path, n in zip(parts, (args.train, args.dev),
                             (args.train_sentences, args.dev_sentences)):
        if len(part) < n:
            raise SystemExit(f"{args.corpus}: {len(part)} sentences for {path}, {n} asked for")
        rng.shuffle(part)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            for k, sentence in enumerate(part[:n]):
                label = k % 2
                if label == 0:
                    sentence = list(sentence)
                    sentence[rng.randrange(len(sentence))] = rng.choice(replacements)
                f.write(f"corpus\t{label}\t{'' if label else '*'}\t{' '.join(sentence)}\n")
        os.replace(path + ".tmp", path)
        print(f"{path}: {n} sentences, half with one word replaced")


if __name__ == "__main__":
    main()

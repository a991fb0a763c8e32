#!/usr/bin/env python3
"""Makes SQuAD 1.1 files from a corpus in WikiExtractor's form (what
`packed-bert prepare` reads): cloze questions, for a fine-tuning run that
needs nothing beside the checkout. Each question is a sentence of its
paragraph with one word (a number, or a word of five letters or more)
replaced by "what", cut to eight words either side; its answer is that
word at its offset in the paragraph. A paragraph (at most 200 words, cut at
a sentence end) gives up to two questions. Every fifth document goes to the dev
file, so that it holds other documents than the training file.

With --version-2 the files are SQuAD 2.0's: each paragraph after the first
also gets a question it cannot answer (is_impossible, no answers): a cloze
question of the paragraph before whose answer word this paragraph does not
hold.

usage: cloze_squad.py CORPUS TRAIN_JSON DEV_JSON [--questions N] [--seed S]
                      [--version-2]
"""
import argparse
import json
import os
import random
import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
WORD = re.compile(r"\S+")
ANSWER = re.compile(r"^(?:[A-Za-z]{5,}|[0-9]{2,})$")


def documents(path):
    title, paragraphs = None, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("<doc "):
                title, paragraphs = None, []
            elif line == "</doc>":
                if title is not None:
                    yield title, paragraphs
            elif line and title is None:
                title = line
            elif line:
                paragraphs.append(line)


def questions(context, rng, qid):
    sentences, start = [], 0
    for m in SENTENCE_END.finditer(context):
        sentences.append((start, m.start()))
        start = m.end()
    sentences.append((start, len(context)))
    rng.shuffle(sentences)
    for begin, end in sentences[:2]:
        words = [(m.start() + begin, m.group()) for m in WORD.finditer(context[begin:end])]
        candidates = [i for i, (_, w) in enumerate(words) if ANSWER.match(w.strip(".,;:!?\"'()"))]
        if len(words) < 6 or not candidates:
            continue
        i = rng.choice(candidates)
        offset, token = words[i]
        answer = token.strip(".,;:!?\"'()")
        offset += token.index(answer)
        around = [w for _, w in words[max(0, i - 8):i]] + ["what"] + \
                 [w for _, w in words[i + 1:i + 9]]
        yield {"id": f"{qid}-{offset}", "question": " ".join(around).rstrip(".,;:!?") + "?",
               "answers": [{"text": answer, "answer_start": offset}]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus")
    parser.add_argument("train")
    parser.add_argument("dev")
    parser.add_argument("--questions", type=int, default=4000, help="questions in all")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--version-2", action="store_true",
                        help="SQuAD 2.0: questions without an answer too")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    version = "v2.0" if args.version_2 else "1.1"
    outputs = ({"version": version, "data": []}, {"version": version, "data": []})
    made = 0
    previous = []  # the last paragraph's questions
    for d, (title, paragraphs) in enumerate(documents(args.corpus)):
        article = {"title": title, "paragraphs": []}
        for p, text in enumerate(paragraphs):
            words = text.split(" ")
            if len(words) < 30:
                continue
            context = " ".join(words[:200])
            cut = max(context.rfind(". "), context.rfind(".")) if len(words) > 200 else -1
            if cut > 0:
                context = context[:cut + 1]
            qas = list(questions(context, rng, f"{d}-{p}"))
            if args.version_2 and qas:
                words = {w.strip(".,;:!?\"'()").lower() for w in context.split()}
                for q in previous:
                    if q["answers"][0]["text"].lower() not in words:
                        qas.append({"id": f"{d}-{p}-none", "question": q["question"],
                                    "answers": [], "is_impossible": True})
                        break
                previous = [q for q in qas if not q.get("is_impossible")]
            if qas:
                article["paragraphs"].append({"context": context, "qas": qas})
                made += len(qas)
        if article["paragraphs"]:
            outputs[1 if d % 5 == 4 else 0]["data"].append(article)
        if made >= args.questions:
            break
    for data, path in zip(outputs, (args.train, args.dev)):
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False)
        os.replace(path + ".tmp", path)
        n = sum(len(p["qas"]) for a in data["data"] for p in a["paragraphs"])
        print(f"{path}: {n} questions")


if __name__ == "__main__":
    main()

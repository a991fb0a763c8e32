#!/usr/bin/python3
"""Independent scores of packed-bert's token and multi-label predictions.

    token_and_label_reference.py conll PREDICTIONS
        PREDICTIONS: lines "word gold predicted", a blank line between
        sentences (what `finetune --task ner` writes for a labeled file).
        Prints {"precision", "recall", "f1", "accuracy"} as conlleval.pl
        counts them: its per-token state machine (startOfChunk, endOfChunk,
        the inCorrect flag) transcribed from the Perl script, fractions in
        [0, 1] instead of its percentages.

    token_and_label_reference.py multilabel GOLD PREDICTIONS THRESHOLD
        GOLD: "text TAB ids TAB id" lines; PREDICTIONS: packed-bert's
        predictions.tsv (a header, then id, the chosen ids, each label's
        probability). Prints {"micro_f1", "macro_f1"} as sklearn's f1_score
        computes them on the indicator matrices (a label neither true nor
        predicted counts 0 in the macro mean).
"""
import json
import sys


def split(tag):
    # conlleval: /^([^-]*)-(.*)$/, else the tag with type "".
    if "-" in tag:
        prefix, kind = tag.split("-", 1)
        return prefix, kind
    return tag, ""


def end_of_chunk(prev_tag, tag, prev_type, kind):
    end = False
    if prev_tag == "B" and tag == "B": end = True
    if prev_tag == "B" and tag == "O": end = True
    if prev_tag == "I" and tag == "B": end = True
    if prev_tag == "I" and tag == "O": end = True
    if prev_tag == "E" and tag == "E": end = True
    if prev_tag == "E" and tag == "I": end = True
    if prev_tag == "E" and tag == "O": end = True
    if prev_tag == "I" and tag == "O": end = True
    if prev_tag != "O" and prev_tag != "." and prev_type != kind: end = True
    if prev_tag == "]": end = True
    if prev_tag == "[": end = True
    return end


def start_of_chunk(prev_tag, tag, prev_type, kind):
    start = False
    if prev_tag == "B" and tag == "B": start = True
    if prev_tag == "I" and tag == "B": start = True
    if prev_tag == "O" and tag == "B": start = True
    if prev_tag == "O" and tag == "I": start = True
    if prev_tag == "E" and tag == "E": start = True
    if prev_tag == "E" and tag == "I": start = True
    if prev_tag == "O" and tag == "E": start = True
    if prev_tag == "O" and tag == "I": start = True
    if tag != "O" and tag != "." and prev_type != kind: start = True
    if tag == "[": start = True
    if tag == "]": start = True
    return start


def conll(path):
    correct_chunk = found_correct = found_guessed = correct_tags = tokens = 0
    in_correct = False
    last_correct, last_correct_type = "O", ""
    last_guessed, last_guessed_type = "O", ""
    lines = open(path, encoding="utf-8").read().split("\n")
    for line in lines + [""]:
        features = line.split()
        boundary = len(features) == 0
        if boundary:
            features = ["-X-", "O", "O"]
        guessed, guessed_type = split(features[-1])
        correct, correct_type = split(features[-2])
        if in_correct:
            if end_of_chunk(last_correct, correct, last_correct_type, correct_type) and \
                    end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type) and \
                    last_guessed_type == last_correct_type:
                in_correct = False
                correct_chunk += 1
            elif end_of_chunk(last_correct, correct, last_correct_type, correct_type) != \
                    end_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type) or \
                    guessed_type != correct_type:
                in_correct = False
        if start_of_chunk(last_correct, correct, last_correct_type, correct_type) and \
                start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type) and \
                guessed_type == correct_type:
            in_correct = True
        if start_of_chunk(last_correct, correct, last_correct_type, correct_type):
            found_correct += 1
        if start_of_chunk(last_guessed, guessed, last_guessed_type, guessed_type):
            found_guessed += 1
        if not boundary:
            if correct == guessed and guessed_type == correct_type:
                correct_tags += 1
            tokens += 1
        last_guessed, last_correct = guessed, correct
        last_guessed_type, last_correct_type = guessed_type, correct_type
    if in_correct:
        correct_chunk += 1
    precision = correct_chunk / found_guessed if found_guessed else 0.0
    recall = correct_chunk / found_correct if found_correct else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1,
            "accuracy": correct_tags / tokens if tokens else 0.0,
            "entities": found_correct}


def multilabel(gold_path, predicted_path, threshold):
    gold = {}
    for line in open(gold_path, encoding="utf-8"):
        line = line.rstrip("\n")
        if not line:
            continue
        text, ids, name = line.split("\t")
        gold[name] = {int(i) for i in ids.split(",")}
    rows = open(predicted_path, encoding="utf-8").read().splitlines()
    classes = len(rows[0].split("\t")) - 2
    truth, chosen = [], []
    for row in rows[1:]:
        fields = row.split("\t")
        truth.append([int(k in gold[fields[0]]) for k in range(classes)])
        chosen.append([int(float(p) >= threshold) for p in fields[2:]])
    tp = [sum(t[k] and p[k] for t, p in zip(truth, chosen)) for k in range(classes)]
    fp = [sum((not t[k]) and p[k] for t, p in zip(truth, chosen)) for k in range(classes)]
    fn = [sum(t[k] and not p[k] for t, p in zip(truth, chosen)) for k in range(classes)]

    def f1(a, b, c):
        return 2 * a / (2 * a + b + c) if 2 * a + b + c else 0.0

    return {"micro_f1": f1(sum(tp), sum(fp), sum(fn)),
            "macro_f1": sum(f1(tp[k], fp[k], fn[k]) for k in range(classes)) / classes}


if __name__ == "__main__":
    if sys.argv[1] == "conll":
        print(json.dumps(conll(sys.argv[2])))
    else:
        print(json.dumps(multilabel(sys.argv[2], sys.argv[3], float(sys.argv[4]))))

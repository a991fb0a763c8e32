#!/usr/bin/python3
"""An independent implementation of BERT's instance generation
(create_pretraining_data.py: create_instances_from_document,
truncate_seq_pair, create_masked_lm_predictions), written from the published
algorithm with Python's own random module, to compare instance statistics
with the C++ generator on the same tokenized documents.

    pretraining_reference.py DOCS MAX_LEN DUPE SHORT_PROB MASK_PROB MAX_PRED VOCAB CLS SEP MASK

DOCS: one sentence of space-separated ids per line, blank lines between
documents. Prints one JSON object of statistics.
"""
import json
import random
import sys


def truncate_pair(a, b, max_tokens, rng):
    while len(a) + len(b) > max_tokens:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def mask(tokens, mask_prob, max_pred, vocab, cls, sep, mask_id, rng):
    candidates = [[i] for i, t in enumerate(tokens) if t not in (cls, sep)]
    rng.shuffle(candidates)
    output = list(tokens)
    to_predict = min(max_pred, max(1, int(round(len(tokens) * mask_prob))))
    masked = []
    for group in candidates:
        if len(masked) >= to_predict:
            break
        if len(masked) + len(group) > to_predict:
            continue
        for i in group:
            if rng.random() < 0.8:
                output[i] = mask_id
            elif rng.random() < 0.5:
                output[i] = tokens[i]
            else:
                output[i] = rng.randint(0, vocab - 1)
            masked.append(i)
    return output, sorted(masked)


def from_document(docs, index, max_len, short_prob, mask_prob, max_pred, vocab, cls, sep, mask_id,
                  rng, out):
    document = docs[index]
    max_tokens = max_len - 3
    target = max_tokens
    if rng.random() < short_prob:
        target = rng.randint(2, max_tokens)
    chunk, length, i = [], 0, 0
    while i < len(document):
        chunk.append(document[i])
        length += len(document[i])
        if i == len(document) - 1 or length >= target:
            a_end = rng.randint(1, len(chunk) - 1) if len(chunk) >= 2 else 1
            a = [t for s in chunk[:a_end] for t in s]
            b = []
            random_next = len(chunk) == 1 or rng.random() < 0.5
            if random_next:
                b_target = target - len(a)
                for _ in range(10):
                    other = rng.randint(0, len(docs) - 1)
                    if other != index:
                        break
                source = docs[other]
                for j in range(rng.randint(0, len(source) - 1), len(source)):
                    b.extend(source[j])
                    if len(b) >= b_target:
                        break
                i -= len(chunk) - a_end
            else:
                b = [t for s in chunk[a_end:] for t in s]
            truncate_pair(a, b, max_tokens, rng)
            if a and b:
                tokens = [cls] + a + [sep] + b + [sep]
                _, masked = mask(tokens, mask_prob, max_pred, vocab, cls, sep, mask_id, rng)
                out.append((len(tokens), len(masked), random_next))
            chunk, length = [], 0
        i += 1


def main():
    path = sys.argv[1]
    max_len, dupe = int(sys.argv[2]), int(sys.argv[3])
    short_prob, mask_prob = float(sys.argv[4]), float(sys.argv[5])
    max_pred, vocab, cls, sep, mask_id = map(int, sys.argv[6:11])
    docs, current = [], []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                if current:
                    docs.append(current)
                current = []
            else:
                current.append([int(t) for t in line.split()])
    if current:
        docs.append(current)
    rng = random.Random(12345)
    out = []
    for _ in range(dupe):
        for index in range(len(docs)):
            from_document(docs, index, max_len, short_prob, mask_prob, max_pred, vocab, cls, sep,
                          mask_id, rng, out)
    n = len(out)
    print(json.dumps({
        "instances": n,
        "mean_length": sum(o[0] for o in out) / n,
        "full_length_share": sum(o[0] == max_len for o in out) / n,
        "short_share": sum(o[0] < max_len // 2 for o in out) / n,
        "masked_per_instance": sum(o[1] for o in out) / n,
        "random_next_share": sum(o[2] for o in out) / n,
    }))


if __name__ == "__main__":
    main()

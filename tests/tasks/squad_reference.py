#!/usr/bin/python3
"""An independent SQuAD 1.1 and 2.0 featurizer and answer extractor for
parity tests, written from Google's published algorithm (google-research/bert
run_squad.py: read_squad_examples, convert_examples_to_features with
_improve_answer_span and _check_is_max_context, write_predictions with
_get_best_indexes, get_final_text and _compute_softmax, and
version_2_with_negative's null answer), in Python with the reference
tokenizer of tests/data/bert_tokenizer_reference.py, so that it shares no
code with the C++ one.

    squad_reference.py VOCAB SQUAD_JSON MAX_SEQ DOC_STRIDE MAX_QUERY TRAINING \
        FEATURES_OUT [--version-2] [--logits LOGITS_JSON --n-best N \
        --max-answer M --null-threshold T --predictions PREDICTIONS_OUT]

FEATURES_OUT gets one JSON line per feature: example, ids, segments, start,
end, word (-1 outside the context), max_context. LOGITS_JSON holds
[[start logits], [end logits]] per feature, in that order. PREDICTIONS_OUT
gets {"predictions": ..., "nbest": ..., "null_odds": ...} as run_squad.py
writes predictions.json, nbest_predictions.json and null_odds.json.
"""
import argparse
import json
import math
import os
import sys

sys.dont_write_bytecode = True  # nothing written beside the checkout's sources
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
import bert_tokenizer_reference as ref  # noqa: E402


class Tokenizer:
    def __init__(self, vocab_path):
        self.vocab = {}
        self.tokens = []
        with open(vocab_path, encoding="utf-8") as f:
            for i, line in enumerate(f):
                self.vocab.setdefault(line.strip(), i)
                self.tokens.append(line.strip())

    def basic(self, text):
        return ref.basic_tokens(text, True)

    def tokenize(self, text):
        return [p for w in self.basic(text) for p in ref.wordpiece(w, self.vocab)]


def is_whitespace(c):
    return c in " \t\r\n" or ord(c) == 0x202F


def read_examples(path, training, version_2):
    examples = []
    for entry in json.load(open(path, encoding="utf-8"))["data"]:
        for paragraph in entry["paragraphs"]:
            text = paragraph["context"]
            doc_tokens, char_to_word, prev_ws = [], [], True
            for c in text:
                if is_whitespace(c):
                    prev_ws = True
                else:
                    if prev_ws:
                        doc_tokens.append(c)
                    else:
                        doc_tokens[-1] += c
                    prev_ws = False
                char_to_word.append(len(doc_tokens) - 1)
            for qa in paragraph["qas"]:
                ex = {"id": qa["id"], "question": qa["question"], "doc_tokens": doc_tokens,
                      "answers": [a["text"] for a in qa.get("answers", [])], "skip": False,
                      "impossible": version_2 and qa.get("is_impossible", False)}
                if training and not ex["impossible"]:
                    answer = qa["answers"][0]
                    offset, length = answer["answer_start"], len(answer["text"])
                    ex["start"] = char_to_word[offset]
                    ex["end"] = char_to_word[offset + length - 1]
                    actual = " ".join(doc_tokens[ex["start"]:ex["end"] + 1])
                    cleaned = " ".join(answer["text"].split())
                    ex["skip"] = actual.find(cleaned) == -1
                examples.append(ex)
    return examples


def improve_answer_span(doc_tokens, start, end, tokenizer, answer):
    wanted = " ".join(tokenizer.tokenize(answer))
    for s in range(start, end + 1):
        for e in range(end, s - 1, -1):
            if " ".join(doc_tokens[s:e + 1]) == wanted:
                return s, e
    return start, end


def is_max_context(spans, current, position):
    best_score, best = None, None
    for i, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best = score, i
    return current == best


def features(examples, tokenizer, max_seq, stride, max_query, training):
    out = []
    for e, ex in enumerate(examples):
        if ex["skip"]:
            continue
        query = tokenizer.tokenize(ex["question"])[:max_query]
        tok_to_orig, orig_to_tok, all_tokens = [], [], []
        for i, token in enumerate(ex["doc_tokens"]):
            orig_to_tok.append(len(all_tokens))
            for sub in tokenizer.tokenize(token):
                tok_to_orig.append(i)
                all_tokens.append(sub)
        if training and not ex["impossible"]:
            ts = orig_to_tok[ex["start"]]
            te = (orig_to_tok[ex["end"] + 1] - 1 if ex["end"] < len(ex["doc_tokens"]) - 1
                  else len(all_tokens) - 1)
            ts, te = improve_answer_span(all_tokens, ts, te, tokenizer, ex["answers"][0])
        room = max_seq - len(query) - 3
        spans, start = [], 0
        while start < len(all_tokens):
            length = min(len(all_tokens) - start, room)
            spans.append((start, length))
            if start + length == len(all_tokens):
                break
            start += min(length, stride)
        for k, (start, length) in enumerate(spans):
            tokens = ["[CLS]"] + query + ["[SEP]"]
            segments = [0] * len(tokens)
            word = [-1] * len(tokens)
            maxc = [0] * len(tokens)
            for i in range(length):
                j = start + i
                word.append(tok_to_orig[j])
                maxc.append(1 if is_max_context(spans, k, j) else 0)
                tokens.append(all_tokens[j])
                segments.append(1)
            tokens.append("[SEP]")
            segments.append(1)
            word.append(-1)
            maxc.append(0)
            s = t = 0
            if training and not ex["impossible"] and ts >= start and te <= start + length - 1:
                offset = len(query) + 2
                s, t = ts - start + offset, te - start + offset
            out.append({"example": e, "ids": [tokenizer.vocab[x] for x in tokens],
                        "tokens": tokens, "segments": segments, "start": s, "end": t,
                        "word": word, "max_context": maxc})
    return out


def best_indexes(logits, n):
    order = sorted(enumerate(logits), key=lambda x: x[1], reverse=True)
    return [i for i, _ in order[:n]]


def strip_spaces(text):
    chars, where = [], {}
    for i, c in enumerate(text):
        if c == " ":
            continue
        where[len(chars)] = i
        chars.append(c)
    return "".join(chars), where


def final_text(pred, orig, tokenizer):
    tok_text = " ".join(tokenizer.basic(orig))
    start = tok_text.find(pred)
    if start == -1:
        return orig
    end = start + len(pred) - 1
    orig_ns, orig_map = strip_spaces(orig)
    tok_ns, tok_map = strip_spaces(tok_text)
    if len(orig_ns) != len(tok_ns):
        return orig
    tok_s_to_ns = {v: k for k, v in tok_map.items()}
    os_ = orig_map.get(tok_s_to_ns[start]) if start in tok_s_to_ns else None
    if os_ is None:
        return orig
    oe = orig_map.get(tok_s_to_ns[end]) if end in tok_s_to_ns else None
    if oe is None:
        return orig
    return orig[os_:oe + 1]


def softmax(scores):
    largest = max(scores)
    exps = [math.exp(x - largest) for x in scores]
    total = sum(exps)
    return [x / total for x in exps]


def predictions(examples, feats, logits, tokenizer, n_best, max_answer, version_2, threshold):
    by_example = {}
    for i, f in enumerate(feats):
        by_example.setdefault(f["example"], []).append(i)
    answers, nbests, null_odds = {}, {}, {}
    for e, ex in enumerate(examples):
        prelim = []
        score_null, null_feature, null_start, null_end = 1000000, 0, 0, 0
        for i in by_example.get(e, []):
            f = feats[i]
            starts, ends = logits[i]
            if version_2 and starts[0] + ends[0] < score_null:
                score_null, null_feature = starts[0] + ends[0], i
                null_start, null_end = starts[0], ends[0]
            for s in best_indexes(starts, n_best):
                for t in best_indexes(ends, n_best):
                    if s >= len(f["tokens"]) or t >= len(f["tokens"]):
                        continue
                    if f["word"][s] < 0 or f["word"][t] < 0 or not f["max_context"][s]:
                        continue
                    if t < s or t - s + 1 > max_answer:
                        continue
                    prelim.append((i, s, t, starts[s], ends[t]))
        if version_2:
            prelim.append((null_feature, 0, 0, null_start, null_end))
        prelim.sort(key=lambda x: x[3] + x[4], reverse=True)
        nbest, seen = [], set()
        for i, s, t, start_logit, end_logit in prelim:
            if len(nbest) >= n_best:
                break
            if s > 0:
                f = feats[i]
                tok_text = " ".join(f["tokens"][s:t + 1]).replace(" ##", "").replace("##", "")
                tok_text = " ".join(tok_text.strip().split())
                orig_text = " ".join(ex["doc_tokens"][f["word"][s]:f["word"][t] + 1])
                text = final_text(tok_text, orig_text, tokenizer)
                if text in seen:
                    continue
            else:
                text = ""
            seen.add(text)
            nbest.append((text, start_logit, end_logit))
        if version_2 and "" not in seen:
            nbest.append(("", null_start, null_end))
        if not nbest:
            nbest.append(("empty", 0.0, 0.0))
        probs = softmax([a + b for _, a, b in nbest])
        nbests[ex["id"]] = [{"text": text, "probability": p, "start_logit": a, "end_logit": b}
                            for (text, a, b), p in zip(nbest, probs)]
        if not version_2:
            answers[ex["id"]] = nbest[0][0]
            continue
        best = next((n for n in nbest if n[0]), None)
        if best is None:  # run_squad.py fails here; the null answer is its only one
            null_odds[ex["id"]] = score_null
            answers[ex["id"]] = ""
            continue
        diff = score_null - best[1] - best[2]
        null_odds[ex["id"]] = diff
        answers[ex["id"]] = "" if diff > threshold else best[0]
    return {"predictions": answers, "nbest": nbests, "null_odds": null_odds}


def main():
    parser = argparse.ArgumentParser()
    for name in ("vocab", "path", "max_seq", "stride", "max_query", "training", "features_out"):
        parser.add_argument(name)
    parser.add_argument("--version-2", action="store_true")
    parser.add_argument("--logits")
    parser.add_argument("--n-best", type=int, default=20)
    parser.add_argument("--max-answer", type=int, default=30)
    parser.add_argument("--null-threshold", type=float, default=0.0)
    parser.add_argument("--predictions")
    args = parser.parse_args()
    tokenizer = Tokenizer(args.vocab)
    training = args.training == "1"
    examples = read_examples(args.path, training, args.version_2)
    feats = features(examples, tokenizer, int(args.max_seq), int(args.stride),
                     int(args.max_query), training)
    with open(args.features_out, "w", encoding="utf-8") as f:
        for feat in feats:
            feat = dict(feat)
            del feat["tokens"]
            f.write(json.dumps(feat) + "\n")
    if args.logits:
        logits = json.load(open(args.logits))
        preds = predictions(examples, feats, logits, tokenizer, args.n_best, args.max_answer,
                            args.version_2, args.null_threshold)
        with open(args.predictions, "w", encoding="utf-8") as f:
            json.dump(preds, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

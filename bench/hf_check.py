#!/usr/bin/env python3
"""packed-bert's Hugging Face export, loaded by transformers itself.

    python3 bench/hf_check.py BINARY WORKDIR

Makes a tiny BERT with packed-bert (model init, weights drawn wide so that
the logits are far from uniform), exports it (model export-hf), scores 64
random sequences of an MLPerf HDF5 file with packed-bert (score, fp32, on
the CPU) and with transformers' BertForPreTraining.from_pretrained(EXPORT)
on the same file, and compares the MLM loss per masked token (to 1e-5
relative), the MLM and NSP accuracies; BertTokenizerFast.from_pretrained
must give the ids of the exported vocabulary. Then the fine-tuned exports
(finetune, one epoch on the CPU, fp32): BertForSequenceClassification and
BertForQuestionAnswering.from_pretrained must load them with no missing
and no unexpected weight, and the classifier's predictions on the dev
pairs (tokenized by the exported BertTokenizerFast) must score the accuracy
that packed-bert reported. Needs transformers, torch and h5py (a GPU
machine's Python has them). Prints one line per check; exits 1 if one
fails.
"""
import json
import os
import subprocess
import sys

import h5py
import numpy as np
import torch
from transformers import (BertForPreTraining, BertForQuestionAnswering,
                          BertForSequenceClassification, BertTokenizerFast)

VOCAB = 500
MAX_LEN = 128
MAX_PREDICTIONS = 20


def write_vocab(path):
    words = ["w%d" % i for i in range(VOCAB)]
    for i, special in ((0, "[PAD]"), (100, "[UNK]"), (101, "[CLS]"), (102, "[SEP]"), (103, "[MASK]")):
        words[i] = special
    with open(path, "w") as f:
        f.write("\n".join(words) + "\n")


def write_eval(path, count=64, seed=5):
    rng = np.random.default_rng(seed)
    ids = np.zeros((count, MAX_LEN), np.int32)
    mask = np.zeros((count, MAX_LEN), np.int32)
    segments = np.zeros((count, MAX_LEN), np.int32)
    positions = np.zeros((count, MAX_PREDICTIONS), np.int32)
    labels = np.zeros((count, MAX_PREDICTIONS), np.int32)
    nsp = rng.integers(0, 2, count).astype(np.int32)
    for r in range(count):
        n = int(rng.integers(16, MAX_LEN + 1))
        ids[r, :n] = rng.integers(104, VOCAB, n)
        ids[r, 0], ids[r, n // 2], ids[r, n - 1] = 101, 102, 102
        mask[r, :n] = 1
        segments[r, n // 2 + 1:n] = 1
        chosen = rng.choice(np.arange(1, n - 1)[np.arange(1, n - 1) != n // 2],
                            size=min(MAX_PREDICTIONS, max(1, n // 7)), replace=False)
        chosen.sort()
        positions[r, :len(chosen)] = chosen
        labels[r, :len(chosen)] = ids[r, chosen]
        ids[r, chosen] = 103
    with h5py.File(path, "w") as f:
        for name, data in (("input_ids", ids), ("input_mask", mask), ("segment_ids", segments),
                           ("masked_lm_positions", positions), ("masked_lm_ids", labels),
                           ("next_sentence_labels", nsp)):
            f.create_dataset(name, data=data)
    return ids, mask, segments, positions, labels, nsp


def finetuned_checks(binary, work, config, vocab, weights):
    """The fine-tuned exports, loaded by transformers: a list of checks."""
    rng = np.random.default_rng(7)

    def sentence(n):
        return " ".join("w%d" % w for w in rng.integers(104, VOCAB, n))

    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
    pairs = {}
    for part, count in (("train", 96), ("dev", 32)):
        rows = []
        for i in range(count):
            a, b = sentence(int(rng.integers(3, 20))), sentence(int(rng.integers(3, 20)))
            label = int(rng.integers(0, 2))
            if label:
                b = a.split()[0] + " " + b
            rows.append((label, a, b))
        pairs[part] = rows
        with open(os.path.join(work, part + ".tsv"), "w") as f:
            f.write(header + "".join("%d\t%d\t%d\t%s\t%s\n" % (l, i, i + 1, a, b)
                                     for i, (l, a, b) in enumerate(rows)))
    contexts = [sentence(40) for _ in range(8)]
    squad = {"version": "1.1", "data": [{"title": "t", "paragraphs": [
        {"context": c, "qas": [{"id": "q%d" % i, "question": " ".join(c.split()[5:9]),
                                "answers": [{"text": c.split()[9], "answer_start": len(" ".join(c.split()[:9])) + 1}]}]}
        for i, c in enumerate(contexts)]}]}
    with open(os.path.join(work, "squad.json"), "w") as f:
        json.dump(squad, f)
    common = [binary, "finetune", *config, "--init", weights, "--set", "prepare.vocab=" + vocab,
              "--set", "finetune.max_seq_length=64", "--set", "finetune.epochs=1"]
    checks = []
    for task, train, dev, cls in (("mrpc", "train.tsv", "dev.tsv", BertForSequenceClassification),
                                  ("squad", "squad.json", "squad.json", BertForQuestionAnswering)):
        run = os.path.join(work, "finetune-" + task)
        subprocess.run(["rm", "-rf", run], check=True)
        extra = ["--set", "finetune.max_query_length=16"] if task == "squad" else []
        out = json.loads(subprocess.run(
            common + ["--task", task, "--train", os.path.join(work, train), "--eval", os.path.join(work, dev),
                      "--set", "run.output_dir=" + run] + extra,
            check=True, capture_output=True, text=True).stdout)
        model, info = cls.from_pretrained(os.path.join(run, "model"), output_loading_info=True)
        missing, unexpected = info["missing_keys"], info["unexpected_keys"]
        checks.append(("%s loads %s" % (cls.__name__, task), not missing and not unexpected,
                       "missing %s, unexpected %s" % (missing, unexpected)))
        if task != "mrpc":
            continue
        tokenizer = BertTokenizerFast.from_pretrained(os.path.join(run, "model"))
        model.eval()
        right = 0
        with torch.no_grad():
            for label, a, b in pairs["dev"]:
                encoded = tokenizer(a, b, truncation="longest_first", max_length=64, return_tensors="pt")
                right += int(model(**encoded).logits.argmax(-1).item() == label)
        theirs = right / len(pairs["dev"])
        checks.append(("BertForSequenceClassification dev accuracy", abs(theirs - out["accuracy"]) < 1e-9,
                       "%.4f (packed-bert %.4f)" % (theirs, out["accuracy"])))
    return checks


def main(binary, work):
    os.makedirs(work, exist_ok=True)
    vocab, weights, export, data = (os.path.join(work, n) for n in ("vocab.txt", "w.safetensors", "hf", "eval.hdf5"))
    here = os.path.dirname(os.path.abspath(__file__))
    config = ["--config", os.path.join(here, "..", "configs", "bert-tiny.yaml"),
              "--set", "model.vocab_size=%d" % VOCAB, "--set", "model.max_position_embeddings=%d" % MAX_LEN,
              "--set", "model.initializer_range=0.3", "--set", "run.device=cpu",
              "--set", "model.precision=fp32", "--log-level", "warn"]
    write_vocab(vocab)
    subprocess.run([binary, "model", "init", *config, "--seed", "3", "--out", weights, "--overwrite"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([binary, "model", "export-hf", weights, export, *config, "--vocab", vocab, "--overwrite"],
                   check=True, stdout=subprocess.DEVNULL)
    ids, mask, segments, positions, labels, nsp = write_eval(data)
    ours = json.loads(subprocess.run([binary, "score", *config, "--weights", weights, "--data", data],
                                     check=True, capture_output=True, text=True).stdout)

    model = BertForPreTraining.from_pretrained(export).eval()
    with torch.no_grad():
        out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                    token_type_ids=torch.tensor(segments, dtype=torch.long),
                    attention_mask=torch.tensor(mask, dtype=torch.long))
    logits = out.prediction_logits.double()
    losses, correct = [], 0
    for r in range(len(ids)):
        for p, label in zip(positions[r], labels[r]):
            if p == 0:
                continue
            row = torch.log_softmax(logits[r, p], -1)
            losses.append(-row[label].item())
            correct += int(row.argmax().item() == label)
    theirs_loss = float(np.mean(losses))
    theirs_mlm = correct / len(losses)
    theirs_nsp = float((out.seq_relationship_logits.argmax(-1).numpy() == nsp).mean())
    tokenizer = BertTokenizerFast.from_pretrained(export)
    tokenized = tokenizer("w105 w200", add_special_tokens=True)["input_ids"]

    checks = [
        ("MLM loss per masked token", abs(theirs_loss - ours["mlm_loss_per_token"]) <= 1e-5 * ours["mlm_loss_per_token"],
         "%.6f (packed-bert %.6f)" % (theirs_loss, ours["mlm_loss_per_token"])),
        ("MLM accuracy", abs(theirs_mlm - ours["mlm_accuracy"]) <= 1.0 / len(losses),
         "%.4f (packed-bert %.4f)" % (theirs_mlm, ours["mlm_accuracy"])),
        ("NSP accuracy", abs(theirs_nsp - ours["nsp_accuracy"]) <= 1.0 / len(ids),
         "%.4f (packed-bert %.4f)" % (theirs_nsp, ours["nsp_accuracy"])),
        ("BertTokenizerFast ids", tokenized == [101, 105, 200, 102], str(tokenized)),
    ] + finetuned_checks(binary, work, config, vocab, weights)
    failed = 0
    for name, ok, detail in checks:
        print("- from_pretrained %s: %s %s" % (name, detail, "ok" if ok else "DIFFERS"))
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

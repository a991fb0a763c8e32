#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpus, tests/fuzz/corpus/TARGET/, with
writers other than packed-bert's where there are some (torch.save, h5py,
tests/model/write_tf_bundle.py, Python's json), so that the seeds are files
as users bring them. An input that stands for several files is their parts
as fuzz_target.h's Parts reads them (a 4-byte little-endian length before
each part but the last); the task targets' first byte is a choice
(fuzz_target.h's TakeChoice: the set's version, labeled or not, ...).

  python3 tests/fuzz/make_seeds.py [BINARY]

BINARY (build/packed-bert) writes the instance-store and pack-index seeds
(`prepare`, `pack`); without it those are kept as they are.
"""
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def parts(*chunks):
    out = b""
    for chunk in chunks[:-1]:
        out += struct.pack("<I", len(chunk)) + chunk
    return out + chunks[-1]


def write(target, name, data):
    folder = os.path.join(HERE, "corpus", target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def torch_seeds():
    import torch
    from collections import OrderedDict

    dicts = {
        "state-dict": OrderedDict(
            [("bert.embeddings.word_embeddings.weight", torch.arange(12.0).reshape(3, 4)),
             ("bert.pooler.dense.bias", torch.ones(4, dtype=torch.bfloat16)),
             ("cls.predictions.bias", torch.zeros(3, dtype=torch.float16)),
             ("step", 7)]),
        "wrapped": {"model": {"w": torch.arange(6, dtype=torch.int64).reshape(2, 3).t(),
                              "v": torch.tensor([1.5, -2.0])},
                    "epoch": 1, "name": "bert"},
        "shared-storage": (lambda base: {"a": base[:2], "b": base[1:]})(torch.arange(5.0)),
    }
    for name, value in dicts.items():
        buffer = io.BytesIO()
        torch.save(value, buffer)
        whole = buffer.getvalue()
        write("torch_save", name + ".pt", whole)
        with zipfile.ZipFile(io.BytesIO(whole)) as archive:
            records = {n.split("/", 1)[1]: archive.read(n) for n in archive.namelist()}
        storages = [records.get("data/%d" % k, b"") for k in range(3)]
        write("pickle", name, parts(records["data.pkl"], *storages))


def safetensors_seeds():
    def file(tensors):
        header, data = {"__metadata__": {"format": "pt"}}, b""
        for name, (dtype, shape, raw) in tensors.items():
            header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [len(data), len(data) + len(raw)]}
            data += raw
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        return struct.pack("<Q", len(text)) + text + data

    write("safetensors", "float-and-int.safetensors", file({
        "bert.embeddings.word_embeddings.weight": ("F32", [2, 3], struct.pack("<6f", *range(6))),
        "ids": ("I64", [2], struct.pack("<2q", 4, -1)),
        "half": ("BF16", [2], b"\x80\x3f\x00\x40"),
        "empty": ("F16", [0, 4], b"")}))
    write("safetensors", "scalar.safetensors", file({"s": ("F64", [], struct.pack("<d", 2.5))}))


def tensor_bundle_seeds():
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "model.ckpt")
        subprocess.run([sys.executable, os.path.join(ROOT, "tests/model/write_tf_bundle.py"),
                        prefix, os.path.join(tmp, "expected"), "8", "4", "1", "8", "8"],
                       check=True)
        with open(prefix + ".index", "rb") as f:
            index = f.read()
        with open(prefix + ".data-00000-of-00001", "rb") as f:
            data = f.read()
        write("tensor_bundle", "bert-tiny", parts(index, data))


def hdf5_seeds():
    import h5py
    import numpy as np

    rng = np.random.default_rng(5)
    rows, width, slots = 3, 16, 3
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "fixed.hdf5")
        with h5py.File(path, "w") as f:
            mask = np.zeros((rows, width), np.int8)
            for r, n in enumerate([16, 9, 5]):
                mask[r, :n] = 1
            f["input_ids"] = (rng.integers(999, 2000, (rows, width)) * mask).astype(np.int32)
            f["input_mask"] = mask
            f["segment_ids"] = np.zeros((rows, width), np.int8)
            f["masked_lm_positions"] = np.array([[1, 2, 0], [3, 0, 0], [1, 0, 0]], np.int32)
            f["masked_lm_ids"] = np.array([[1005, 1006, 0], [1007, 0, 0], [1008, 0, 0]], np.int32)
            f["next_sentence_labels"] = np.array([0, 1, 0], np.int8)
        with open(path, "rb") as f:
            write("hdf5", "fixed.hdf5", f.read())
        path = os.path.join(tmp, "varlength.hdf5")
        with h5py.File(path, "w") as f:
            vlen = h5py.vlen_dtype(np.int16)
            for key, values in [("input_ids", [[101, 2000, 102], [101, 2001, 2002, 102]]),
                                ("segment_ids", [[0, 0, 0], [0, 0, 1, 1]]),
                                ("masked_lm_positions", [[1], [2]]),
                                ("masked_lm_ids", [[2003], [2004]])]:
                dataset = f.create_dataset(key, (2,), dtype=vlen)
                for r, row in enumerate(values):
                    dataset[r] = np.array(row, np.int16)
            f["next_sentence_labels"] = np.array([0, 1], np.int8)
        with open(path, "rb") as f:
            write("hdf5", "varlength.hdf5", f.read())


def text_seeds():
    write("json", "manifest.json", json.dumps(
        {"format": "pbstore", "version": 1, "shards": [{"file": "shard-00000.pbstore",
                                                          "records": 3}],
         "vocab_checksum": "0x1234", "max_seq_length": 128}, indent=1))
    write("json", "config.json", json.dumps(
        {"architectures": ["BertForSequenceClassification"], "hidden_size": 768,
         "id2label": {"0": "neg", "1": "pos"}, "layer_norm_eps": 1e-12,
         "nested": [[1, [2, [3.5e-3, None, True]]]], "text": "caf\u00e9 \\n \"q\""}))
    for name in ["bert-tiny.yaml", "glue-bert-base.yaml", "ner-bert-base.yaml"]:
        path = os.path.join(ROOT, "configs", name)
        if os.path.exists(path):
            with open(path, "rb") as f:
                write("yaml", name, parts(b"optim.total_steps=400\nrun.seed=3\n", f.read()))
    write("yaml", "anchors.yaml", parts(
        b"model.precision=bf16\n",
        b"run: &r {seed: 1, output_dir: out}\ntrain:\n  micro_batch_rows: 8\n"
        b"finetune: {task: multilabel, labels: 'a,b', threshold: 0.25}\n"
        b"model:\n  hidden_size: 64  # small\n  num_heads: 4\n  num_layers: 2\n"
        b"  intermediate_size: 256\n"))
    vocab = ["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] + \
        ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "##ly", "fox", "'", ",", "caf\u00e9"]
    write("vocab", "vocab.txt", "\n".join(vocab) + "\n")
    write("squad", "v1-answers", b"\x02" + json.dumps({"version": "1.1", "data": [{
        "title": "T", "paragraphs": [{
            "context": "The quick brown fox jumped over the lazy dog in 1984.",
            "qas": [{"id": "q1", "question": "Who jumped?",
                     "answers": [{"text": "brown fox", "answer_start": 10}]},
                    {"id": "q2", "question": "When?",
                     "answers": [{"text": "1984", "answer_start": 48}]}]}]}]}).encode())
    write("squad", "v2-answers", b"\x03" + json.dumps({"version": "v2.0", "data": [{
        "title": "U", "paragraphs": [{
            "context": "Caf\u00e9s open early; the baker's bread is warm.",
            "qas": [{"id": "a", "question": "What is warm?", "is_impossible": False,
                     "answers": [{"text": "bread", "answer_start": 30}]},
                    {"id": "b", "question": "Who sings?", "is_impossible": True,
                     "answers": [], "plausible_answers": [{"text": "baker", "answer_start": 22}]}
                    ]}]}]}).encode())
    write("squad", "v1-test", b"\x00" + json.dumps({"data": [{"title": "x", "paragraphs": [{
        "context": "One two three.", "qas": [{"id": "z", "question": "Two?"}]}]}]}).encode())
    # glue: the choice is 2 * (the task's place in GlueTasks(): cola, sst2,
    # mrpc, stsb, qqp, mnli, ...) + labeled.
    write("glue", "cola", b"\x01" + b"gj04\t1\t\tOur friends won't buy this analysis.\n"
          b"gj04\t0\t*\tThey drank the pub.\n")
    write("glue", "sst2", b"\x03" + b"sentence\tlabel\nit 's a charming journey . \t1\nbad\t0\n")
    write("glue", "mrpc", b"\x05" + b"Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n"
          b"1\t702876\t702977\tHe said so.\tHe said it.\n0\t2108705\t2108831\tA b.\tC d.\n")
    write("glue", "stsb", b"\x07" + b"index\tgenre\tfilename\tyear\told_index\tsource1\t"
          b"source2\tsentence1\tsentence2\tscore\n0\tmain-captions\tMSRvid\t2012test\t0001\t"
          b"none\tnone\tA plane is taking off.\tAn air plane is taking off.\t5.000\n")
    write("glue", "mnli-test", b"\x0a" + b"index\tpromptID\tpairID\tgenre\tsentence1_binary_parse"
          b"\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\tsentence1\tsentence2\n"
          b"0\t31193\t31193n\tgovernment\t( a )\t( b )\t(ROOT a)\t(ROOT b)\tA man.\tA woman.\n")
    write("conll", "iob1", b"\x01" + b"-DOCSTART- -X- -X- O\n\nEU NNP B-NP I-ORG\n"
          b"rejects VBZ B-VP O\nGerman JJ B-NP I-MISC\ncall NN I-NP O\n. . O O\n\n"
          b"Peter NNP B-NP I-PER\nBlackburn NNP I-NP I-PER\n")
    write("conll", "iob2", b"\x01" + b"Paris\tB-LOC\nis\tO\nin\tO\nFrance\tB-LOC\n\n"
          b"New\tB-LOC\nYork\tI-LOC\nTimes\tB-ORG\n")
    write("conll", "unlabeled", b"\x00" + b"-DOCSTART-\n\nA\nsentence\n.\n\nAnother\n")
    write("multilabel", "goemotions", b"\x41" + parts(
        b"admiration\namusement\nanger\nneutral\n",
        b"My favourite food is anything I didn't have to cook myself.\t3\teebbqej\n"
        b"Now if he does off himself, everyone will think he's having a laugh\t1,3\ted00q6i\n"))
    write("multilabel", "test-no-names", b"\x05" + parts(b"", b"just text\nmore text\tx\n"))


def binary_seeds(binary):
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.txt")
        with open(corpus, "w") as f:
            for d in range(3):
                for s in range(6):
                    f.write("the quick fox number %d jumps over sentence %d again.\n" % (d, s))
                f.write("\n")
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w") as f:
            words = ["[PAD]"] + ["[unused%d]" % i for i in range(1, 100)] + \
                ["[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "quick", "fox", "number", "jumps",
                 "over", "sentence", "again", "."] + [str(d) for d in range(10)]
            f.write("\n".join(words) + "\n")
        store, packs = os.path.join(tmp, "store"), os.path.join(tmp, "packs.pbpack")
        common = ["--set", "data.store=" + store, "--set", "data.max_seq_len=32",
                  "--set", "data.pack_index=" + packs]
        subprocess.run([binary, "prepare", "--set", "prepare.inputs=[%s]" % corpus,
                        "--set", "prepare.vocab=" + vocab, "--set", "prepare.dupe_factor=1"]
                       + common, check=True, capture_output=True)
        with open(os.path.join(store, "store.json"), "rb") as f:
            manifest = f.read()
        with open(os.path.join(store, "shard-00000.pbstore"), "rb") as f:
            shard = f.read()
        write("store", "store", parts(manifest, shard))
        subprocess.run([binary, "pack"] + common, check=True, capture_output=True)
        with open(packs, "rb") as f:
            write("pack_index", "packs.pbpack", f.read())


def main():
    torch_seeds()
    safetensors_seeds()
    tensor_bundle_seeds()
    hdf5_seeds()
    text_seeds()
    if len(sys.argv) > 1:
        binary_seeds(sys.argv[1])


if __name__ == "__main__":
    main()

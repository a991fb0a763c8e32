#!/usr/bin/env python3
"""Writes PyTorch checkpoints with python3-torch's torch.save, for the tests
of model/torch_save.cc: the state_dict() of real nn.Module trees in the two
layouts users bring, and files that must be refused.

Usage: write_torch_checkpoints.py DIR VOCAB HIDDEN LAYERS INTERMEDIATE MAXPOS
Writes in DIR:
  hf.pt         model.state_dict() of a Hugging Face-layout BertForPreTraining
                (tied decoder weight and bias, the position_ids buffer)
  nvidia.pt     {'model': state_dict(), 'optimizer': ..., 'epoch': ...} of
                NVIDIA's MLPerf layout (dense_act layers), one tensor stored
                transposed (strided), as their run_pretraining.py saves it
  legacy.pt     the same state dict in the pre-1.6 (non-zip) format
  no_tensors.pt a dict without tensors
  expected.json + expected.f32: every parameter under Hugging Face names, raw
  fuzz/NNN.pt   hf.pt with its data.pkl mutated (flipped bits, cut, spliced),
                re-zipped with valid CRCs so that the mutation reaches the
                unpickler: the reader must refuse or read each, never crash
  hostile/      files that ask for calls (os.system and builtins.eval as
                torch.save writes them, subprocess.call by STACK_GLOBAL) and
                a list nested 300,000 deep: refused by name, never run or
                followed down the stack
"""
import copy
import json
import os
import random
import zipfile
import sys

import torch
from torch import nn


def linear(i, o):
    return nn.Linear(i, o)


def build(vocab, hidden, layers, inter, max_pos, dense="dense"):
    def with_dense(module, i, o):
        setattr(module, dense, linear(i, o))
        return module

    root = nn.Module()
    bert = root.bert = nn.Module()
    emb = bert.embeddings = nn.Module()
    emb.word_embeddings = nn.Embedding(vocab, hidden)
    emb.position_embeddings = nn.Embedding(max_pos, hidden)
    emb.token_type_embeddings = nn.Embedding(2, hidden)
    emb.LayerNorm = nn.LayerNorm(hidden)
    emb.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0))
    bert.encoder = nn.Module()
    bert.encoder.layer = nn.ModuleList()
    for _ in range(layers):
        layer = nn.Module()
        layer.attention = nn.Module()
        layer.attention.self = nn.Module()
        for part in ("query", "key", "value"):
            setattr(layer.attention.self, part, linear(hidden, hidden))
        layer.attention.output = nn.Module()
        layer.attention.output.dense = linear(hidden, hidden)
        layer.attention.output.LayerNorm = nn.LayerNorm(hidden)
        layer.intermediate = with_dense(nn.Module(), hidden, inter)
        layer.output = nn.Module()
        layer.output.dense = linear(inter, hidden)
        layer.output.LayerNorm = nn.LayerNorm(hidden)
        bert.encoder.layer.append(layer)
    bert.pooler = with_dense(nn.Module(), hidden, hidden)
    cls = root.cls = nn.Module()
    cls.predictions = nn.Module()
    cls.predictions.transform = with_dense(nn.Module(), hidden, hidden)
    cls.predictions.transform.LayerNorm = nn.LayerNorm(hidden)
    cls.predictions.decoder = nn.Linear(hidden, vocab)
    cls.predictions.bias = nn.Parameter(torch.zeros(vocab))
    # Tied as Hugging Face ties them: the decoder shares both tensors.
    cls.predictions.decoder.weight = emb.word_embeddings.weight
    cls.predictions.decoder.bias = cls.predictions.bias
    cls.seq_relationship = linear(hidden, 2)
    return root


def mutate(data, rng):
    data = bytearray(data)
    kind = rng.randrange(4)
    if kind == 0:  # flip a few bits
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # cut
        data = data[:rng.randrange(len(data))]
    elif kind == 2:  # a random byte (often an opcode) somewhere
        data.insert(rng.randrange(len(data)), rng.randrange(256))
    else:  # repeat a slice (memo keys, marks, nested containers)
        a = rng.randrange(len(data))
        b = min(len(data), a + rng.randint(1, 16))
        data[a:a] = data[a:b]
    return bytes(data)


def write_fuzz(source, folder, count):
    os.makedirs(folder, exist_ok=True)
    rng = random.Random(5)
    with zipfile.ZipFile(source) as z:
        records = [(info.filename, z.read(info.filename)) for info in z.infolist()]
    for k in range(count):
        with zipfile.ZipFile(f"{folder}/{k:03d}.pt", "w", zipfile.ZIP_STORED) as z:
            for name, data in records:
                z.writestr(name, mutate(data, rng) if name.endswith("/data.pkl") else data)


class Evaluated:
    """Unpickles as eval("1 + 1"): what a hostile file asks for."""

    def __reduce__(self):
        return (eval, ("1 + 1",))


def write_raw(path, pickle_bytes):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("hostile/data.pkl", pickle_bytes)


def write_hostile(folder):
    os.makedirs(folder, exist_ok=True)
    weights = {"w": torch.zeros(2)}
    torch.save({**weights, "hook": os.system}, f"{folder}/system.pt")
    torch.save({**weights, "value": Evaluated()}, f"{folder}/eval.pt")
    # Protocol 4's STACK_GLOBAL: the module and name as strings on the stack.
    write_raw(f"{folder}/call.pt",
              b"\x80\x04}\x8c\x01k\x8c\x0asubprocess\x8c\x04call\x93s.")
    depth = 300_000  # each list appended into the one below it
    write_raw(f"{folder}/deep.pt", b"\x80\x02" + b"]" * depth + b"a" * (depth - 1) + b".")


def main():
    out = sys.argv[1]
    vocab, hidden, layers, inter, max_pos = map(int, sys.argv[2:7])
    torch.manual_seed(11)
    hf = build(vocab, hidden, layers, inter, max_pos)
    with torch.no_grad():
        for p in hf.parameters():
            p.normal_()  # LayerNorms and biases too, so a mix-up shows
    nvidia = build(vocab, hidden, layers, inter, max_pos, dense="dense_act")
    hf_state = hf.state_dict()
    nvidia.load_state_dict({k: v for k, v in hf_state.items()}, strict=False)
    with torch.no_grad():
        for (name, p) in nvidia.named_parameters():
            p.copy_(hf_state[name.replace(".dense_act.", ".dense.")])

    torch.save(hf.state_dict(), f"{out}/hf.pt")
    state = nvidia.state_dict()
    key = "bert.encoder.layer.0.attention.self.query.weight"
    state[key] = state[key].t().contiguous().t()  # same values, column-major storage
    assert not state[key].is_contiguous()
    # Optimizer state beside the model, as run_pretraining.py saves it (of a
    # copy: a step would move the weights the state dict shares).
    trained = copy.deepcopy(nvidia)
    optimizer = torch.optim.Adam(trained.parameters())
    sum(p.sum() for p in trained.parameters()).backward()
    optimizer.step()
    torch.save({"model": state, "optimizer": optimizer.state_dict(), "epoch": 2,
                "files": ["part-00000-of-00500.hdf5"], "data_loader": None},
               f"{out}/nvidia.pt")
    torch.save(hf.state_dict(), f"{out}/legacy.pt", _use_new_zipfile_serialization=False)
    torch.save({"epoch": 1, "files": ["a"]}, f"{out}/no_tensors.pt")

    write_fuzz(f"{out}/hf.pt", f"{out}/fuzz", 300)
    write_hostile(f"{out}/hostile")

    names = [n for n, _ in hf.named_parameters()]  # tied ones once
    with open(f"{out}/expected.json", "w") as f:
        json.dump([[n, list(hf_state[n].shape)] for n in names], f)
    with open(f"{out}/expected.f32", "wb") as f:
        for n in names:
            f.write(hf_state[n].contiguous().numpy().astype("<f4").tobytes())


if __name__ == "__main__":
    main()

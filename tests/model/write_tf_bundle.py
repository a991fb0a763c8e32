#!/usr/bin/env python3
"""Writes a TensorFlow BERT checkpoint (tensor bundle) without TensorFlow.

An independent writer for the tests of model/tf_bundle.cc, following
TensorFlow's format documentation: tensorflow/core/util/tensor_bundle/
tensor_bundle.h (PREFIX.index is a table of BundleEntryProto values keyed by
tensor name, with a BundleHeaderProto under the empty key; PREFIX.data-NNNNN-
of-NNNNN holds the raw little-endian bytes, each tensor's masked CRC-32C in
its entry) and LevelDB's table_format.md (prefix-compressed blocks with
restart points, block trailers of type + masked CRC-32C, a 48-byte footer).

Usage: write_tf_bundle.py PREFIX EXPECTED VOCAB HIDDEN LAYERS INTERMEDIATE MAXPOS [CASE]
Writes the bundle at PREFIX, and EXPECTED.json + EXPECTED.f32: the values
our model should hold after loading it, under Hugging Face names, in the
PyTorch layout ([out, in] weights), as raw float32. CASE: good (default),
unknown_dtype, missing, wrong_shape, or fuzz: then PREFIX-NNN for 200
bundles whose index blocks are mutated (flipped bits, cuts, inserted bytes)
before their CRCs are computed, so that the mutation reaches the parser.
"""
import json
import random
import struct
import sys

import numpy as np


def crc32c_table():
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
        table.append(crc)
    return table


TABLE = crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc = TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def mask(crc):
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field_varint(number, value):
    return varint(number << 3) + varint(value)


def field_bytes(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def field_fixed32(number, value):
    return varint(number << 3 | 5) + struct.pack("<I", value)


# types.proto numbers
DT_FLOAT, DT_INT64 = 1, 9


def entry_proto(dtype, shape, offset, size, crc):
    dims = b"".join(field_bytes(2, field_varint(1, d)) for d in shape)
    return (field_varint(1, dtype) + field_bytes(2, dims) + field_varint(3, 0) +
            field_varint(4, offset) + field_varint(5, size) + field_fixed32(6, mask(crc)))


def header_proto():
    version = field_varint(1, 1)  # VersionDef.producer
    return field_varint(1, 1) + field_varint(2, 0) + field_bytes(3, version)


class BlockBuilder:
    """LevelDB block: entries (shared, unshared, value length, key suffix,
    value) with a full key every `restart_interval` entries."""

    def __init__(self, restart_interval=4):
        self.buffer = bytearray()
        self.restarts = [0]
        self.count = 0
        self.last_key = b""
        self.interval = restart_interval

    def add(self, key, value):
        shared = 0
        if self.count == self.interval:
            self.restarts.append(len(self.buffer))
            self.count = 0
        else:
            while (shared < min(len(key), len(self.last_key)) and
                   key[shared] == self.last_key[shared]):
                shared += 1
        self.buffer += varint(shared) + varint(len(key) - shared) + varint(len(value))
        self.buffer += key[shared:] + value
        self.last_key = key
        self.count += 1

    def finish(self):
        out = bytes(self.buffer)
        out += b"".join(struct.pack("<I", r) for r in self.restarts)
        return out + struct.pack("<I", len(self.restarts))

    def empty(self):
        return not self.buffer


def mutate(data, rng):
    data = bytearray(data)
    if not data:
        return bytes(data)
    kind = rng.randrange(3)
    if kind == 0:
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        data = data[:rng.randrange(len(data))]
    else:
        data.insert(rng.randrange(len(data)), rng.randrange(256))
    return bytes(data)


def write_table(path, items, block_size=512, change=None):
    out = bytearray()
    index = BlockBuilder(restart_interval=1)

    def emit(block):
        if change is not None:
            block = change(block)
        handle = varint(len(out)) + varint(len(block))
        trailer_type = b"\x00"
        out.extend(block + trailer_type + struct.pack("<I", mask(crc32c(block + trailer_type))))
        return handle

    block = BlockBuilder()
    for key, value in items:
        block.add(key, value)
        if len(block.buffer) >= block_size:
            index.add(key, emit(block.finish()))
            block = BlockBuilder()
    if not block.empty():
        index.add(items[-1][0], emit(block.finish()))
    meta_handle = emit(BlockBuilder().finish())
    index_handle = emit(index.finish())
    footer = meta_handle + index_handle
    footer += b"\x00" * (40 - len(footer)) + struct.pack("<Q", 0xDB4775248B80FB57)
    out.extend(footer)
    with open(path, "wb") as f:
        f.write(out)


def main():
    prefix, expected_path = sys.argv[1], sys.argv[2]
    vocab, hidden, layers, inter, max_pos = map(int, sys.argv[3:8])
    case = sys.argv[8] if len(sys.argv) > 8 else "good"
    rng = np.random.default_rng(7)

    tf_tensors = []  # (TF name, array as TensorFlow stores it)
    expected = []    # (HF name, array in our layout)

    def add(tf_name, hf_name, shape, kernel=False):
        value = rng.standard_normal(shape).astype(np.float32)
        tf_tensors.append((tf_name, value))
        expected.append((hf_name, value.T.copy() if kernel else value))

    add("bert/embeddings/word_embeddings", "bert.embeddings.word_embeddings.weight", (vocab, hidden))
    add("bert/embeddings/position_embeddings", "bert.embeddings.position_embeddings.weight",
        (max_pos, hidden))
    add("bert/embeddings/token_type_embeddings", "bert.embeddings.token_type_embeddings.weight",
        (2, hidden))
    add("bert/embeddings/LayerNorm/gamma", "bert.embeddings.LayerNorm.weight", (hidden,))
    add("bert/embeddings/LayerNorm/beta", "bert.embeddings.LayerNorm.bias", (hidden,))
    for i in range(layers):
        tf, hf = f"bert/encoder/layer_{i}/", f"bert.encoder.layer.{i}."
        for part in ("query", "key", "value"):
            add(tf + f"attention/self/{part}/kernel", hf + f"attention.self.{part}.weight",
                (hidden, hidden), kernel=True)
            add(tf + f"attention/self/{part}/bias", hf + f"attention.self.{part}.bias", (hidden,))
        add(tf + "attention/output/dense/kernel", hf + "attention.output.dense.weight",
            (hidden, hidden), kernel=True)
        add(tf + "attention/output/dense/bias", hf + "attention.output.dense.bias", (hidden,))
        add(tf + "attention/output/LayerNorm/gamma", hf + "attention.output.LayerNorm.weight",
            (hidden,))
        add(tf + "attention/output/LayerNorm/beta", hf + "attention.output.LayerNorm.bias",
            (hidden,))
        add(tf + "intermediate/dense/kernel", hf + "intermediate.dense.weight", (hidden, inter),
            kernel=True)
        add(tf + "intermediate/dense/bias", hf + "intermediate.dense.bias", (inter,))
        add(tf + "output/dense/kernel", hf + "output.dense.weight", (inter, hidden), kernel=True)
        add(tf + "output/dense/bias", hf + "output.dense.bias", (hidden,))
        add(tf + "output/LayerNorm/gamma", hf + "output.LayerNorm.weight", (hidden,))
        add(tf + "output/LayerNorm/beta", hf + "output.LayerNorm.bias", (hidden,))
    pooler_shape = (hidden, hidden + 1) if case == "wrong_shape" else (hidden, hidden)
    add("bert/pooler/dense/kernel", "bert.pooler.dense.weight", pooler_shape, kernel=True)
    if case != "missing":
        add("bert/pooler/dense/bias", "bert.pooler.dense.bias", (hidden,))
    add("cls/predictions/output_bias", "cls.predictions.bias", (vocab,))
    add("cls/predictions/transform/dense/kernel", "cls.predictions.transform.dense.weight",
        (hidden, hidden), kernel=True)
    add("cls/predictions/transform/dense/bias", "cls.predictions.transform.dense.bias", (hidden,))
    add("cls/predictions/transform/LayerNorm/gamma", "cls.predictions.transform.LayerNorm.weight",
        (hidden,))
    add("cls/predictions/transform/LayerNorm/beta", "cls.predictions.transform.LayerNorm.bias",
        (hidden,))
    add("cls/seq_relationship/output_weights", "cls.seq_relationship.weight", (2, hidden))
    add("cls/seq_relationship/output_bias", "cls.seq_relationship.bias", (2,))

    # Training state the MLPerf phase-1 checkpoint carries: LAMB's moments
    # under adam_m / adam_v, and the step counter.
    slots = []
    for name, value in tf_tensors:
        slots.append((name + "/adam_m", np.full_like(value, 0.5)))
        slots.append((name + "/adam_v", np.full_like(value, 0.25)))
    all_tensors = tf_tensors + slots + [("global_step", np.array(28252, dtype=np.int64))]

    data = bytearray()
    items = [(b"", header_proto())]
    for name, value in sorted(all_tensors, key=lambda item: item[0].encode()):
        raw = value.astype("<f4" if value.dtype == np.float32 else "<i8").tobytes()
        dtype = DT_FLOAT if value.dtype == np.float32 else DT_INT64
        if case == "unknown_dtype" and name == "bert/pooler/dense/bias":
            dtype = 99
        items.append((name.encode(),
                      entry_proto(dtype, value.shape, len(data), len(raw), crc32c(raw))))
        data += raw
    if case == "fuzz":
        rng = random.Random(9)
        for k in range(200):
            with open(f"{prefix}-{k:03d}.data-00000-of-00001", "wb") as f:
                f.write(data)
            # One block in three changed (the index block among them).
            write_table(f"{prefix}-{k:03d}.index", items,
                        change=lambda b: mutate(b, rng) if rng.random() < 0.34 else b)
        return
    with open(prefix + ".data-00000-of-00001", "wb") as f:
        f.write(data)
    write_table(prefix + ".index", items)

    with open(expected_path + ".json", "w") as f:
        json.dump([[name, list(value.shape)] for name, value in expected], f)
    with open(expected_path + ".f32", "wb") as f:
        for _, value in expected:
            f.write(value.astype("<f4").tobytes())


if __name__ == "__main__":
    main()

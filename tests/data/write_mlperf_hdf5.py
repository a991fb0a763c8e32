#!/usr/bin/env python3
"""Writes MLPerf BERT HDF5 files with h5py (an independent writer), in the
dtypes and storage layouts such files come in, plus what each holds:

  write_mlperf_hdf5.py OUT_DIR

OUT_DIR/<variant>.hdf5 for each variant below, and OUT_DIR/expected.json:
per variant, the sequences as the MLPerf rules read them (a row's tokens are
those under input_mask; its masked slots those with a non-zero position),
derived here from the arrays, independently of packed-bert. And bad files,
OUT_DIR/bad-<case>.hdf5, with what must be named in the error.
"""
import json
import os
import sys

import h5py
import numpy as np

S, P, N = 32, 5, 40
VOCAB = 30522


def make_rows(rng):
    ids = np.zeros((N, S), np.int64)
    mask = np.zeros((N, S), np.int64)
    segments = np.zeros((N, S), np.int64)
    positions = np.zeros((N, P), np.int64)
    masked = np.zeros((N, P), np.int64)
    labels = rng.integers(0, 2, N)
    for r in range(N):
        length = int(rng.integers(6, S + 1))
        split = int(rng.integers(2, length - 2))  # [CLS] A [SEP] B [SEP]
        ids[r, :length] = rng.integers(1000, VOCAB, length)
        ids[r, 0], ids[r, split], ids[r, length - 1] = 101, 102, 102
        mask[r, :length] = 1
        segments[r, split + 1:length] = 1
        candidates = [i for i in range(1, length - 1) if i != split]
        k = int(rng.integers(0, min(P, len(candidates)) + 1))
        chosen = sorted(rng.choice(candidates, k, replace=False).tolist())
        positions[r, :k] = chosen
        masked[r, :k] = rng.integers(1000, VOCAB, k)
    return dict(input_ids=ids, input_mask=mask, segment_ids=segments,
                masked_lm_positions=positions, masked_lm_ids=masked,
                next_sentence_labels=labels)


def expected(rows):
    out = []
    for r in range(N):
        length = int(rows["input_mask"][r].sum())
        used = rows["masked_lm_positions"][r] != 0
        out.append(dict(
            input_ids=rows["input_ids"][r, :length].tolist(),
            segment_ids=rows["segment_ids"][r, :length].tolist(),
            masked_positions=rows["masked_lm_positions"][r][used].tolist(),
            masked_ids=rows["masked_lm_ids"][r][used].tolist(),
            next_sentence_label=int(rows["next_sentence_labels"][r])))
    return out


# name -> (dtype per dataset, dataset creation options)
NVIDIA = dict(input_ids="i4", input_mask="i1", segment_ids="i1", masked_lm_positions="i4",
              masked_lm_ids="i4", next_sentence_labels="i1")
VARIANTS = {
    # NVIDIA's MLPerf writer: int32 ids, int8 masks, gzip (chunked).
    "nvidia-gzip": (NVIDIA, dict(compression="gzip")),
    # int64 throughout, contiguous, uncompressed (numpy's default integers).
    "int64-contiguous": ({k: "i8" for k in NVIDIA}, {}),
    # int16 ids and positions, shuffle + gzip 9 in small chunks.
    "int16-shuffle": (dict(NVIDIA, input_ids="i2", masked_lm_positions="i2", masked_lm_ids="i2"),
                      dict(compression="gzip", compression_opts=9, shuffle=True,
                           chunks=True)),
    # Unsigned types and big-endian storage.
    "unsigned-bigendian": (dict(input_ids=">u2", input_mask="u1", segment_ids="u1",
                                masked_lm_positions=">u4", masked_lm_ids=">u2",
                                next_sentence_labels="u1"), {}),
}


def write(path, rows, dtypes, options):
    with h5py.File(path, "w") as f:
        for name, array in rows.items():
            f.create_dataset(name, data=array.astype(dtypes[name]), **options)


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261122)
    rows = make_rows(rng)
    for variant, (dtypes, options) in VARIANTS.items():
        write(os.path.join(out, variant + ".hdf5"), rows, dtypes, options)
    bad = {}

    def bad_file(case, must_name, change):
        broken = {k: v.copy() for k, v in rows.items()}
        dtypes = dict(NVIDIA)
        change(broken, dtypes)
        write(os.path.join(out, f"bad-{case}.hdf5"), broken, dtypes, {})
        bad[case] = must_name

    bad_file("float-ids", "input_ids",
             lambda b, d: d.update(input_ids="f4"))
    bad_file("no-labels", "next_sentence_labels",
             lambda b, d: b.pop("next_sentence_labels"))
    bad_file("short-segments", "segment_ids",
             lambda b, d: b.update(segment_ids=b["segment_ids"][:-1]))
    bad_file("holey-mask", "row 3",
             lambda b, d: b["input_mask"].__setitem__((3, 1), 0))
    bad_file("id-beyond-vocab", "30522",
             lambda b, d: b["input_ids"].__setitem__((5, 2), VOCAB))
    bad_file("position-beyond-length", "row 7",
             lambda b, d: b["masked_lm_positions"].__setitem__(
                 (7, 0), int(b["input_mask"][7].sum())))
    bad_file("segment-two", "segment",
             lambda b, d: b["segment_ids"].__setitem__((9, 1), 2))
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(dict(sequences=expected(rows), variants=list(VARIANTS), bad=bad,
                       vocab_size=VOCAB), f)


if __name__ == "__main__":
    main()

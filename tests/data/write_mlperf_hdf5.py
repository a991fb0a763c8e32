#!/usr/bin/env python3
"""Writes MLPerf BERT HDF5 files with h5py (an independent writer), in the
dtypes and storage layouts such files come in, plus what each holds:

  write_mlperf_hdf5.py OUT_DIR

OUT_DIR/<variant>.hdf5 for each variant below, and OUT_DIR/expected.json:
per variant, the sequences as the MLPerf rules read them (a row's tokens are
those under input_mask; its masked slots those with a non-zero position),
derived here from the arrays, independently of packed-bert. And bad files,
OUT_DIR/bad-<case>.hdf5, with what must be named in the error.

The same sequences also go to NVIDIA's two variable-length layouts, as their
MLPerf scripts write them (HDF5 vlen rows holding only the used entries):
nvidia-varlength.hdf5 (one sequence per row, next_sentence_labels scalar, as
convert_fixed2variable.py) and nvidia-packed.hdf5 (up to 3 sequences per row
of at most PACKED_LEN tokens, masked_lm_positions offset into the row,
per-sequence packed_input_len, packed_masked_lm_len and next_sentence_labels,
as their packed-data generator); expected.json names each packed row's
sequences. Bad packed files: OUT_DIR/bad-packed-<case>.hdf5.
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


PACKED_LEN = 64


def variable_rows(rows, r):
    """Sequence r's used entries, as NVIDIA's variable-length files keep them."""
    length = int(rows["input_mask"][r].sum())
    used = int((rows["masked_lm_positions"][r] != 0).sum())
    return (rows["input_ids"][r, :length], rows["segment_ids"][r, :length],
            rows["masked_lm_positions"][r, :used], rows["masked_lm_ids"][r, :used],
            int(rows["next_sentence_labels"][r]))


def write_varlength(path, rows):
    vlen = {k: h5py.vlen_dtype(np.dtype(t)) for k, t in
            dict(input_ids="int16", segment_ids="int8", masked_lm_positions="int16",
                 masked_lm_ids="int16").items()}
    with h5py.File(path, "w") as f:
        sets = {k: f.create_dataset(k, (N,), dtype=t) for k, t in vlen.items()}
        labels = np.zeros(N, np.int8)
        for r in range(N):
            ids, segments, positions, masked, label = variable_rows(rows, r)
            sets["input_ids"][r] = ids.astype(np.int16)
            sets["segment_ids"][r] = segments.astype(np.int8)
            sets["masked_lm_positions"][r] = positions.astype(np.int16)
            sets["masked_lm_ids"][r] = masked.astype(np.int16)
            labels[r] = label
        f.create_dataset("next_sentence_labels", data=labels)


def packed_assignment(rows, rng):
    """Rows of up to 3 sequences and PACKED_LEN tokens, first fit in a
    shuffled order (any assignment will do: the reader must keep it)."""
    order = rng.permutation(N).tolist()
    packs = []
    for r in order:
        length = int(rows["input_mask"][r].sum())
        for pack in packs:
            used = sum(int(rows["input_mask"][s].sum()) for s in pack)
            if len(pack) < 3 and used + length <= PACKED_LEN:
                pack.append(r)
                break
        else:
            packs.append([r])
    return packs


def packed_arrays(rows, packs):
    out = {k: [] for k in ("input_ids", "segment_ids", "masked_lm_positions", "masked_lm_ids",
                           "next_sentence_labels", "packed_input_len", "packed_masked_lm_len")}
    for pack in packs:
        row = {k: [] for k in out}
        offset = 0
        for r in pack:
            ids, segments, positions, masked, label = variable_rows(rows, r)
            row["input_ids"] += ids.tolist()
            row["segment_ids"] += segments.tolist()
            row["masked_lm_positions"] += (positions + offset).tolist()
            row["masked_lm_ids"] += masked.tolist()
            row["next_sentence_labels"].append(label)
            row["packed_input_len"].append(len(ids))
            row["packed_masked_lm_len"].append(len(positions))
            offset += len(ids)
        for k in out:
            out[k].append(row[k])
    return out


PACKED_TYPES = dict(input_ids="int16", segment_ids="int8", masked_lm_positions="int16",
                    masked_lm_ids="int16", next_sentence_labels="int8", packed_input_len="int16",
                    packed_masked_lm_len="int16")


def write_packed(path, arrays):
    with h5py.File(path, "w") as f:
        for k, t in PACKED_TYPES.items():
            d = f.create_dataset(k, (len(arrays[k]),), dtype=h5py.vlen_dtype(np.dtype(t)))
            for i, row in enumerate(arrays[k]):
                d[i] = np.array(row, dtype=t)


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
    bad_file("short-segments", f"'segment_ids' has {N - 1} rows where 'next_sentence_labels' has {N}",
             lambda b, d: b.update(segment_ids=b["segment_ids"][:-1]))
    bad_file("narrow-segments", f"'segment_ids' is {S - 1} wide where 'input_ids' is {S}",
             lambda b, d: b.update(segment_ids=b["segment_ids"][:, :-1]))
    bad_file("narrow-ids", f"'masked_lm_ids' is {P - 1} wide where 'masked_lm_positions' is {P}",
             lambda b, d: b.update(masked_lm_ids=b["masked_lm_ids"][:, :-1]))
    bad_file("zero-rows", "hold no rows",
             lambda b, d: b.update({k: v[:0] for k, v in b.items()}))
    bad_file("holey-mask", "row 3",
             lambda b, d: b["input_mask"].__setitem__((3, 1), 0))
    bad_file("id-beyond-vocab", "30522",
             lambda b, d: b["input_ids"].__setitem__((5, 2), VOCAB))
    bad_file("position-beyond-length", "row 7",
             lambda b, d: b["masked_lm_positions"].__setitem__(
                 (7, 0), int(b["input_mask"][7].sum())))
    bad_file("segment-two", "segment",
             lambda b, d: b["segment_ids"].__setitem__((9, 1), 2))
    # Files that declare rows they never stored (HDF5 reads fill values for
    # them, which look like rows): contiguous, chunked and variable-length.
    def unstored(case, name, shape, **options):
        path = os.path.join(out, f"bad-{case}.hdf5")
        write(path, rows, dict(NVIDIA), {})
        with h5py.File(path, "a") as f:
            kept = f[name][...] if name in f else None
            del f[name]
            d = f.create_dataset(name, shape, dtype=NVIDIA.get(name, "i4"), **options)
            if kept is not None and options:
                d[:len(kept)] = kept  # the first chunk only
        bad[case] = f"'{name}' declares"

    unstored("declared-rows", "next_sentence_labels", (10**12,))
    unstored("declared-chunks", "input_ids", (N * 1000, S), chunks=(N, S), compression="gzip")
    # Files whose data lies in another file: a reader reads only the file
    # it is given, never one a link in it names.
    target = os.path.join(out, "elsewhere.hdf5")
    write(target, rows, dict(NVIDIA), {})

    def elsewhere(case, must_name, move):
        path = os.path.join(out, f"bad-{case}.hdf5")
        write(path, rows, dict(NVIDIA), {})
        with h5py.File(path, "a") as f:
            move(f)
        bad[case] = must_name

    def external_link(f):
        del f["input_ids"]
        f["input_ids"] = h5py.ExternalLink(target, "input_ids")

    def external_storage(f):
        ids = f["segment_ids"][...].astype("<i4")
        del f["segment_ids"]
        raw = os.path.join(out, "segment_ids.raw")
        ids.tofile(raw)
        f.create_dataset("segment_ids", ids.shape, dtype="<i4", external=[(raw, 0, ids.nbytes)])

    elsewhere("external-link", "'input_ids' is an external link to another file", external_link)
    elsewhere("external-storage", "'segment_ids' keeps its data in external files",
              external_storage)
    # The same sequences in a file twice as wide (as a 512-wide file of
    # 128-token sequences): its width is not its sequences' length.
    wide = {k: (np.pad(v, ((0, 0), (0, S))) if k in ("input_ids", "input_mask", "segment_ids")
                else v) for k, v in rows.items()}
    write(os.path.join(out, "wide.hdf5"), wide, NVIDIA, {})
    lengths = rows["input_mask"].sum(axis=1)
    write_varlength(os.path.join(out, "nvidia-varlength.hdf5"), rows)
    packs = packed_assignment(rows, rng)
    arrays = packed_arrays(rows, packs)
    write_packed(os.path.join(out, "nvidia-packed.hdf5"), arrays)
    with h5py.File(os.path.join(out, "bad-varlength-declared.hdf5"), "w") as f:
        for k, t in PACKED_TYPES.items():
            if k.startswith("packed_"):
                continue
            f.create_dataset(k, (10**12,), dtype=h5py.vlen_dtype(np.dtype(t)))
    bad["varlength-declared"] = "'input_ids' declares"
    bad_packed = {}

    def bad_packed_file(case, must_name, change):
        broken = {k: [list(row) for row in v] for k, v in arrays.items()}
        change(broken)
        write_packed(os.path.join(out, f"bad-packed-{case}.hdf5"), broken)
        bad_packed[case] = must_name

    multi = next(i for i, p in enumerate(packs) if len(p) > 1)
    bad_packed_file("lengths-sum", f"row {multi}",
                    lambda b: b["packed_input_len"][multi].__setitem__(0, b["packed_input_len"][multi][0] + 1))
    bad_packed_file("labels-count", "next_sentence_labels",
                    lambda b: b["next_sentence_labels"][multi].append(0))
    # The second sequence's first masked slot moved onto its [CLS]: a
    # position outside that sequence's tokens.
    def onto_cls(b):
        first_len = b["packed_input_len"][multi][0]
        slot = b["packed_masked_lm_len"][multi][0]
        if b["packed_masked_lm_len"][multi][1] == 0:
            b["packed_masked_lm_len"][multi][1] = 1
            b["packed_masked_lm_len"][multi][0] -= 1
            slot -= 1
        b["masked_lm_positions"][multi][slot] = first_len
    bad_packed_file("position-outside", "masks position", onto_cls)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump(dict(sequences=expected(rows), variants=list(VARIANTS), bad=bad,
                       vocab_size=VOCAB, packed_rows=packs, packed_len=PACKED_LEN,
                       bad_packed=bad_packed, longest=int(lengths.max()),
                       first_longer_than_16=int(np.argmax(lengths > 16)),
                       # pick_eval_samples.py's selection of 7: its own arithmetic.
                       picked_7=[int(i * (N / 7)) for i in range(7)]), f)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""An independent reader of the safetensors layout (8-byte little-endian
header length, JSON header, raw little-endian data), written from the
format's description, not from our C++ code.

    read_safetensors.py FILE EXPECTED.json

EXPECTED.json maps tensor names to {"shape": [...], "sum": s, "first": f}.
Exits 0 if the file holds exactly those tensors with those values.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64}


def main(path, expected_path):
    with open(path, "rb") as f:
        blob = f.read()
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + length].decode("utf-8"))
    data = blob[8 + length :]
    header.pop("__metadata__", None)
    with open(expected_path) as f:
        expected = json.load(f)
    problems = []
    if set(header) != set(expected):
        problems.append(f"names differ: {sorted(set(header) ^ set(expected))}")
    end = 0
    for name, entry in header.items():
        begin, stop = entry["data_offsets"]
        end = max(end, stop)
        array = np.frombuffer(data[begin:stop], dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
        want = expected.get(name)
        if want is None:
            continue
        if list(array.shape) != want["shape"]:
            problems.append(f"{name}: shape {array.shape} != {want['shape']}")
        if not np.isclose(float(array.astype(np.float64).sum()), want["sum"], rtol=1e-6, atol=1e-6):
            problems.append(f"{name}: sum {array.sum()} != {want['sum']}")
        if float(array.reshape(-1)[0]) != want["first"]:
            problems.append(f"{name}: first value {array.reshape(-1)[0]} != {want['first']}")
    if end != len(data):
        problems.append(f"data section has {len(data)} bytes, tensors cover {end}")
    if (8 + length) % 8 != 0:
        problems.append("data does not start 8-byte aligned")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

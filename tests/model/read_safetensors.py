#!/usr/bin/python3
"""An independent reader of the safetensors layout (8-byte little-endian
header length, JSON header, raw little-endian data), written from the
format's description, not from our C++ code.

    read_safetensors.py FILE EXPECTED.json

EXPECTED.json maps tensor names to {"shape": [...], "sum": s, "first": f}.
Exits 0 if the file holds exactly those tensors with those values.
"""
import json
import math
import struct
import sys

# The format's dtype names as struct's little-endian codes: the standard
# library only, so that it runs on any python3.
DTYPES = {"F32": "f", "F64": "d", "F16": "e", "I64": "q", "I32": "i"}


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
        code = DTYPES[entry["dtype"]]
        count = math.prod(entry["shape"])
        if stop - begin != count * struct.calcsize(code):
            problems.append(f"{name}: {stop - begin} bytes for shape {entry['shape']}")
            continue
        values = struct.unpack(f"<{count}{code}", data[begin:stop])
        want = expected.get(name)
        if want is None:
            continue
        if entry["shape"] != want["shape"]:
            problems.append(f"{name}: shape {entry['shape']} != {want['shape']}")
        total = math.fsum(values)
        if not math.isclose(total, want["sum"], rel_tol=1e-6, abs_tol=1e-6):
            problems.append(f"{name}: sum {total} != {want['sum']}")
        if values[0] != want["first"]:
            problems.append(f"{name}: first value {values[0]} != {want['first']}")
    if end != len(data):
        problems.append(f"data section has {len(data)} bytes, tensors cover {end}")
    if (8 + length) % 8 != 0:
        problems.append("data does not start 8-byte aligned")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))

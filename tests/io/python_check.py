"""Cross-checks kiln's files with numpy (Debian's python3-numpy).

usage: python_check.py read NPY SAFETENSORS   -- checks kiln-written files
       python_check.py write NPY              -- writes a file for kiln to read
The expected contents are fixed: see io_python_test.cc.
"""
import json
import struct
import sys

import numpy as np


def expected():
    return {
        "dense/kernel": np.arange(12, dtype=np.float32).reshape(3, 4) / 4,
        "dense/bias": np.array([1, -2, 3], dtype=np.float64),
        "step": np.array(7, dtype=np.int64),
        "mask": np.array([True, False, True]),
    }


def read_safetensors(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, "header not padded to a multiple of 8"
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32,
             "BOOL": np.bool_, "U8": np.uint8}
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(body[b:e], dtype=kinds[info["dtype"]]).reshape(info["shape"])
    return out


def main():
    if sys.argv[1] == "read":
        got = np.load(sys.argv[2])
        want = expected()["dense/kernel"]
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
        assert np.array_equal(got, want), got
        tensors = read_safetensors(sys.argv[3])
        for name, want in expected().items():
            got = tensors[name]
            assert got.dtype == want.dtype, (name, got.dtype)
            assert got.shape == want.shape, (name, got.shape)
            assert np.array_equal(got, want), (name, got)
        print("python_check: ok")
    else:
        np.save(sys.argv[2], np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3) * 10))
        print("python_check: wrote", sys.argv[2])


main()

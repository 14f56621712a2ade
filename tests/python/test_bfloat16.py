"""kiln.bfloat16 from Python: tensors from numpy float arrays and lists (rounded to nearest
even), values back through .numpy() (ml_dtypes.bfloat16 where ml_dtypes is installed, else
float32), ops on bf16 tensors, and the op table's bf16 column."""
import unittest

import numpy as np

import kiln

try:
    import ml_dtypes  # optional
except ImportError:
    ml_dtypes = None


def bits(t):
    """The bf16 bit patterns of a bf16 tensor (a flat list), from its exact float32 values."""
    f = np.asarray(t.numpy(), dtype=np.float32).reshape(-1)
    return (f.view(np.uint32) >> 16).astype(np.uint16).tolist()


class BFloat16Test(unittest.TestCase):
    def test_dtype_name(self):
        self.assertEqual(kiln.bfloat16, "bfloat16")
        t = kiln.tensor(np.array([1.0, 0.1], np.float32), dtype=kiln.bfloat16)
        self.assertEqual(t.dtype, "bfloat16")

    def test_float_arrays_round_to_nearest_even(self):
        f32 = np.array([1.0, 0.1, -2.5], np.float32)
        f32 = np.append(f32, np.array([0x3F808000], np.uint32).view(np.float32))  # a tie
        self.assertEqual(bits(kiln.tensor(f32, dtype=kiln.bfloat16)), [0x3F80, 0x3DCD, 0xC020, 0x3F80])
        above = 1.0 + 2.0**-8 + 2.0**-30  # float64: rounded once (float32 would make a tie)
        self.assertEqual(bits(kiln.tensor(np.array([above]), dtype=kiln.bfloat16)), [0x3F81])
        self.assertEqual(bits(kiln.tensor([0.1, 2.0], dtype="bfloat16")), [0x3DCD, 0x4000])

    def test_numpy_gives_ml_dtypes_or_float32(self):
        t = kiln.tensor(np.array([1.5, -0.25], np.float32), dtype=kiln.bfloat16)
        a = t.numpy()
        if ml_dtypes is None:
            self.assertEqual(a.dtype, np.float32)
        else:
            self.assertEqual(a.dtype, ml_dtypes.bfloat16)
        np.testing.assert_array_equal(np.asarray(a, np.float32), [1.5, -0.25])

    @unittest.skipIf(ml_dtypes is None, "ml_dtypes is not installed: no bfloat16 numpy arrays")
    def test_ml_dtypes_arrays_convert_both_ways(self):
        a = np.array([1.0, 0.1, -3.0], ml_dtypes.bfloat16)
        t = kiln.tensor(a)
        self.assertEqual(t.dtype, "bfloat16")
        np.testing.assert_array_equal(t.numpy().view(np.uint16), a.view(np.uint16))

    def test_ops_compute_via_float32_and_round_once(self):
        one = kiln.tensor(np.array([1.0], np.float32), dtype=kiln.bfloat16)
        tiny = kiln.tensor(np.array([2.0**-8], np.float32), dtype=kiln.bfloat16)
        self.assertEqual(bits(one + tiny), [0x3F80])  # 1 + 2^-8 is a tie: to even
        x = kiln.tensor(np.array([0.1, 0.2, 0.3], np.float32), dtype=kiln.bfloat16)
        s = kiln.sum(x)
        want = np.float32(np.asarray(x.numpy(), np.float32).sum(dtype=np.float32))
        self.assertEqual(bits(s), bits(kiln.tensor(np.array([want], np.float32), dtype=kiln.bfloat16)))

    def test_op_table_has_the_bf16_column(self):
        rows = {r["name"]: r for r in kiln.op_table()}
        self.assertEqual(rows["add"]["bf16"], "via-f32")
        self.assertEqual(rows["reshape"]["bf16"], "bytes")
        self.assertEqual(rows["cast"]["bf16"], "convert")
        self.assertEqual(rows["logical_and"]["bf16"], "no")


if __name__ == "__main__":
    unittest.main()

import os
import tempfile
import unittest

import invoices

HERE = os.path.dirname(os.path.abspath(__file__))
SAMPLE = os.path.join(HERE, "sample.csv")


def _csv(text):
    handle = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False, newline="")
    with handle:
        handle.write(text)
    return handle.name


class RefundTotal(unittest.TestCase):
    def test_refund_of_negative_200_cents_lowers_the_sample_total_to_1300(self):
        # 1000 + 500 are charges; -200 is a refund and is taken off, not added.
        self.assertEqual(invoices.total(SAMPLE), 1300)

    def test_refund_larger_than_charges_gives_a_negative_total(self):
        path = _csv("cents\n100\n-400\n")
        self.addCleanup(os.remove, path)
        self.assertEqual(invoices.total(path), -300)

    def test_cell_that_is_not_an_integer_raises_value_error(self):
        for cell in ("7.5", "ten", "", "0x10", "1_000"):
            with self.subTest(cell=cell):
                path = _csv("id,cents\nA,100\nB," + cell + "\n")
                self.addCleanup(os.remove, path)
                with self.assertRaises(ValueError):
                    invoices.total(path)

    def test_row_missing_its_cents_cell_raises_value_error(self):
        path = _csv("id,cents\nA,100\nB\n")
        self.addCleanup(os.remove, path)
        with self.assertRaises(ValueError):
            invoices.total(path)


if __name__ == "__main__":
    unittest.main()

"""Writes the CSV files of the tabular examples from scikit-learn's bundled data (offline).

    python examples/csv_data.py runs/csv
    strategist train --strategy multi_worker_mirrored \
        --data runs/csv/breast_cancer.csv --label target
    strategist train --strategy multi_worker_mirrored \
        --data runs/csv/diabetes.csv --label progression

`breast_cancer.csv`: 569 tumours, 30 numeric measurements each and `target`
(0 malignant, 1 benign): a classification, since the labels are whole numbers.
`diabetes.csv`: 442 patients, 10 numeric measurements and `progression`, a
disease measure one year later written as a decimal number (`151.0`): a
regression. Both are what a Keras user would save with pandas' `to_csv`.
The features are written standardised (zero mean, unit variance per column),
as one would prepare them for a small multi-layer perceptron.
"""

from __future__ import annotations

import csv
import os
import sys


def _standardised(data):
    return (data - data.mean(axis=0)) / data.std(axis=0)


def write_csv(path: str, columns: list[str], features, label: str, labels, label_format: str):
    """One header row, then one row per example: the features, then the label."""
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([*columns, label])
        for row, value in zip(features, labels, strict=True):
            writer.writerow([f"{v:.6g}" for v in row] + [format(value, label_format)])
    return path


def breast_cancer(folder: str) -> str:
    """`breast_cancer.csv`: a binary classification, labels `0`/`1`."""
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    columns = [name.replace(" ", "_") for name in bunch.feature_names]
    path = os.path.join(folder, "breast_cancer.csv")
    return write_csv(path, columns, _standardised(bunch.data), "target", bunch.target, "d")


def diabetes(folder: str) -> str:
    """`diabetes.csv`: a regression, the target written as a decimal (`151.0`)."""
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    path = os.path.join(folder, "diabetes.csv")
    data = _standardised(bunch.data)
    return write_csv(path, list(bunch.feature_names), data, "progression", bunch.target, ".1f")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    for written in (breast_cancer(out), diabetes(out)):
        print(written)

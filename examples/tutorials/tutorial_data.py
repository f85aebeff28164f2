"""Writes the CSV files the tutorial ports train on, offline.

    python examples/tutorials/tutorial_data.py runs/tutorial-data
    strategist train --data runs/tutorial-data/tumours.csv --label target \
        --model-module examples/tutorials/structured_data_preprocessing.py
    strategist train --data runs/tutorial-data/reviews.csv --label positive \
        --model-module examples/tutorials/text_vectorization_end_to_end.py

`tumours.csv`: scikit-learn's 569 breast-cancer cases as a pandas user's
table of mixed columns, in place of the structured-data tutorial's PetFinder
table: two columns of words (`size`, `texture`: each measurement's tercile
named), four raw numeric measurements (unscaled: the model's `Normalization`
layers adapt to them) and `target` (0 malignant, 1 benign).
`reviews.csv`: 600 short generated reviews, `text` and `positive` (1 when the
review praises), in place of the IMDB reviews of keras-io's text
classification from scratch.
"""

from __future__ import annotations

import csv
import os
import sys

NUMERIC = ["mean radius", "mean concavity", "worst area", "worst smoothness"]
WORDS = {"mean radius": ("size", ("small", "medium", "large")),
         "mean texture": ("texture", ("smooth", "grainy", "rough"))}  # fmt: skip
PRAISE = ["great", "wonderful", "moving", "superb", "delightful", "brilliant", "funny"]
BLAME = ["dull", "awful", "boring", "clumsy", "tedious", "weak", "annoying"]
FILLER = ["the", "film", "plot", "acting", "was", "and", "story", "cast", "really", "quite"]


def tumours(folder: str) -> str:
    """`tumours.csv`: string and numeric columns, a binary label."""
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    names = list(bunch.feature_names)
    path = os.path.join(folder, "tumours.csv")
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        words = [column for column, _ in WORDS.values()]
        writer.writerow([*words, *(n.replace(" ", "_") for n in NUMERIC), "target"])
        tercile_words = []
        for source, (_, levels) in WORDS.items():
            values = bunch.data[:, names.index(source)]
            edges = np.quantile(values, [1 / 3, 2 / 3])
            tercile_words.append([levels[int(np.searchsorted(edges, v))] for v in values])
        for i, label in enumerate(bunch.target):
            numbers = [f"{bunch.data[i, names.index(n)]:.6g}" for n in NUMERIC]
            writer.writerow([*(w[i] for w in tercile_words), *numbers, int(label)])
    return path


def reviews(folder: str, count: int = 600) -> str:
    """`reviews.csv`: a `text` column of sentences and a 0/1 `positive` label."""
    import random

    rng = random.Random(0)
    path = os.path.join(folder, "reviews.csv")
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["text", "positive"])
        for i in range(count):
            positive = i % 2
            mood = PRAISE if positive else BLAME
            words = rng.choices(FILLER, k=6) + rng.choices(mood, k=2)
            rng.shuffle(words)
            writer.writerow([" ".join(words).capitalize() + ".", positive])
    return path


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    print(tumours(out))
    print(reviews(out))

"""`digits`: scikit-learn's bundled handwritten digits as a TFDS dataset.

1,797 real 8x8 grey-scale images of the digits 0-9 (the UCI optical
recognition test set), shipped inside scikit-learn, so the dataset builds with
no network. It goes through the same TFDS code path as `mnist`.
"""

from __future__ import annotations

import numpy as np
import tensorflow_datasets as tfds

_TEST_FRACTION = 0.2
_SPLIT_SEED = 1797


class Digits(tfds.core.GeneratorBasedBuilder):
    """Handwritten digits 0-9, 8x8 pixels, from scikit-learn (no download)."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release: 80/20 train/test split, seeded."}

    def _info(self) -> tfds.core.DatasetInfo:
        return self.dataset_info_from_configs(
            description=__doc__,
            features=tfds.features.FeaturesDict(
                {
                    "image": tfds.features.Image(shape=(8, 8, 1)),
                    "label": tfds.features.ClassLabel(num_classes=10),
                }
            ),
            supervised_keys=("image", "label"),
            homepage="https://archive.ics.uci.edu/dataset/80",
        )

    def _split_generators(self, dl_manager: tfds.download.DownloadManager):
        from sklearn.datasets import load_digits

        bunch = load_digits()
        # Pixel values are 0..16; stretch them to the 0..255 of an image.
        images = np.clip(bunch.images * 16, 0, 255).astype(np.uint8)[..., np.newaxis]
        labels = bunch.target.astype(np.int64)
        order = np.random.default_rng(_SPLIT_SEED).permutation(len(labels))
        n_test = int(len(labels) * _TEST_FRACTION)
        test, train = order[:n_test], order[n_test:]
        return {
            "train": self._generate_examples(images[train], labels[train], train),
            "test": self._generate_examples(images[test], labels[test], test),
        }

    def _generate_examples(self, images: np.ndarray, labels: np.ndarray, ids: np.ndarray):
        for image, label, key in zip(images, labels, ids, strict=True):
            yield int(key), {"image": image, "label": int(label)}

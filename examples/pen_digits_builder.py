"""A user's own TFDS dataset, given to Strategist as a builder module.

    strategist train --dataset pen_digits --dataset-module examples/pen_digits_builder.py \
        --model-module examples/digits_cnn_module.py

Any `tfds.core.GeneratorBasedBuilder` in the file is registered under its
snake-case name when Strategist imports the module, then prepared and sharded
like a catalogue dataset. This one has a single `train` split (Strategist holds
out `--test-fraction` of it for the test) and names its classes. Its examples
are scikit-learn's bundled handwritten digits, so it builds with no network;
your builder would read your own files in `_generate_examples`.
"""

import numpy as np
import tensorflow_datasets as tfds


class PenDigits(tfds.core.GeneratorBasedBuilder):
    """Handwritten digits as 8x8 grey images, labelled with the digit's name."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        names = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
        return self.dataset_info_from_configs(
            features=tfds.features.FeaturesDict(
                {
                    "pixels": tfds.features.Image(shape=(8, 8, 1)),
                    "digit": tfds.features.ClassLabel(names=names),
                }
            ),
            supervised_keys=("pixels", "digit"),
        )

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        from sklearn.datasets import load_digits

        digits = load_digits()
        # scikit-learn's pixels are 0..16: scale them to the 0..255 an image holds.
        pixels = (digits.images * (255 / 16)).round().astype(np.uint8)[..., np.newaxis]
        for key, (image, digit) in enumerate(zip(pixels, digits.target, strict=True)):
            yield key, {"pixels": image, "digit": int(digit)}

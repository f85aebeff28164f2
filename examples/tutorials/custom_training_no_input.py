"""TensorFlow's custom-training tutorial's model: a `Sequential` with no `Input` layer.

From tensorflow/docs site/en/tutorials/distribute/custom_training.ipynb
(`create_model`): Keras builds it on its first call; Strategist builds it
from the data's input spec before it reads it. The tutorial's `valid`
convolutions shrink 28 x 28 Fashion-MNIST images; `same` padding keeps the
bundled 8 x 8 digits large enough for both poolings. Nothing is compiled:
Strategist's defaults (Adam, sparse cross-entropy from logits, accuracy) apply.
"""

import tf_keras as keras


def build_model(spec):
    return keras.Sequential(
        [
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(spec.label.num_classes),
        ]
    )

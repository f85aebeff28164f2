"""A user's image CNN for Strategist, given as a model module.

    strategist train --model-module examples/digits_cnn_module.py --dataset digits
    strategist train --model-module examples/digits_cnn_module.py \
        --dataset pen_digits --dataset-module examples/pen_digits_builder.py

Strategist calls `build_model(spec)` inside the strategy's scope with the
data's `InputSpec`, compiles the model with what `compile_settings` returns
(scaling the optimizer's learning rate with the global batch), maps
`preprocess` over every example, and exports, evaluates and records the run.
Nothing here knows which strategy runs it.
"""

import tf_keras as keras

TASK = "classification"


def build_model(spec):
    """A small CNN for the one image feature of `spec`, one logit per class."""
    image = spec.single_feature
    return keras.Sequential(
        [
            keras.layers.Input(shape=image.shape),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.Conv2D(32, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(spec.label.num_classes),
        ],
        name="digits_cnn",
    )


def compile_settings(spec):
    """Adam at 0.002 for a batch of 32 (Strategist scales it to the global batch)."""
    return {
        "optimizer": keras.optimizers.Adam(learning_rate=0.002),
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    }


def preprocess(image, label):
    """Centres the pixels (Strategist's shards give them in [0, 1])."""
    return image - 0.5, label

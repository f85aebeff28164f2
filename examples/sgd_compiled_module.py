"""A user's model that compiles itself: SGD with momentum and a custom metric.

    strategist train --model-module examples/sgd_compiled_module.py --dataset digits

`build_model` returns a model the user compiled, as a Keras user would; Strategist
keeps the optimizer (its class, momentum and Nesterov setting), the loss and the
metrics, and changes only the learning rate: 0.01 is the rate for a batch of
32, scaled linearly with the global batch (the run's record says by how much).
"""

import tensorflow as tf
import tf_keras as keras


def top2_accuracy(labels, logits):
    """A custom metric: the true class is among the two highest logits."""
    labels = tf.cast(tf.reshape(labels, [-1]), tf.int32)
    return tf.cast(tf.math.in_top_k(labels, logits, k=2), tf.float32)


def build_model(spec):
    model = keras.Sequential(
        [
            keras.layers.Input(shape=spec.single_feature.shape),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(spec.label.num_classes),
        ],
        name="sgd_mlp",
    )
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.01, momentum=0.9, nesterov=True),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy", top2_accuracy],
    )
    return model

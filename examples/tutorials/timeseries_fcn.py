"""keras-io's time-series classification from scratch: a fully convolutional network.

From keras-team/keras-io examples/timeseries/timeseries_classification_from_scratch.py
(`make_model`): three blocks of Conv1D, BatchNormalization and ReLU, global
average pooling and a softmax, trained with Adam and sparse categorical
cross-entropy. Each digit's 64 pixels, read row by row, are the series here
(`preprocess`), in place of the FordA engine readings. The guide trains
500 epochs; for a few, BatchNormalization's moving statistics follow the
batches faster (momentum 0.9, not 0.99), or they still describe the first
batches when the test split is scored.
"""

import tensorflow as tf
import tf_keras as keras


def build_model(spec):
    length = 1
    for size in spec.single_feature.shape:
        length *= size
    input_layer = keras.layers.Input((length, 1))
    x = input_layer
    for _ in range(3):
        x = keras.layers.Conv1D(filters=64, kernel_size=3, padding="same")(x)
        x = keras.layers.BatchNormalization(momentum=0.9)(x)
        x = keras.layers.ReLU()(x)
    x = keras.layers.GlobalAveragePooling1D()(x)
    output_layer = keras.layers.Dense(spec.label.num_classes, activation="softmax")(x)
    model = keras.models.Model(inputs=input_layer, outputs=output_layer)
    model.compile(
        optimizer="adam",
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    return model


def preprocess(image, label):
    return tf.reshape(image, (-1, 1)), label

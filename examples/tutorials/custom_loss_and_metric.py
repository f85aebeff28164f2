"""TensorFlow's "Training and evaluation with the built-in methods": custom loss and metric.

From tensorflow/docs site/en/guide/keras/training_with_built_in_methods.ipynb:
`CustomMSE` (mean squared error plus a penalty pulling predictions to 0.5),
trained on one-hot labels, and the stateful `CategoricalTruePositives`
metric. The guide's dense network on flattened MNIST takes the bundled
digits' 64 pixels here.
"""

import tensorflow as tf
import tf_keras as keras

NUM_CLASSES = 10


class CustomMSE(keras.losses.Loss):
    def __init__(self, regularization_factor=0.1, name="custom_mse"):
        super().__init__(name=name)
        self.regularization_factor = regularization_factor

    def call(self, y_true, y_pred):
        mse = tf.math.reduce_mean(tf.square(y_true - y_pred))
        reg = tf.math.reduce_mean(tf.square(0.5 - y_pred))
        return mse + reg * self.regularization_factor


class CategoricalTruePositives(keras.metrics.Metric):
    def __init__(self, name="categorical_true_positives", **kwargs):
        super().__init__(name=name, **kwargs)
        self.true_positives = self.add_weight(name="ctp", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        y_pred = tf.reshape(tf.argmax(y_pred, axis=1), shape=(-1, 1))
        y_true = tf.reshape(tf.argmax(y_true, axis=1), shape=(-1, 1))
        values = tf.cast(tf.cast(y_true, "int32") == tf.cast(y_pred, "int32"), "float32")
        if sample_weight is not None:
            values = tf.multiply(values, tf.cast(sample_weight, "float32"))
        self.true_positives.assign_add(tf.reduce_sum(values))

    def result(self):
        return self.true_positives

    def reset_state(self):
        self.true_positives.assign(0.0)


def build_model(spec):
    inputs = keras.Input(shape=spec.single_feature.shape, name="digits")
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(64, activation="relu", name="dense_1")(x)
    x = keras.layers.Dense(64, activation="relu", name="dense_2")(x)
    outputs = keras.layers.Dense(spec.label.num_classes, activation="softmax", name="predictions")(
        x
    )
    return keras.Model(inputs=inputs, outputs=outputs)


def compile_settings(spec):
    return {
        "optimizer": keras.optimizers.RMSprop(learning_rate=1e-3),
        "loss": CustomMSE(),
        "metrics": [CategoricalTruePositives(), keras.metrics.CategoricalAccuracy(name="accuracy")],
    }


def preprocess(image, label):
    return image, tf.one_hot(label, NUM_CLASSES)

"""TensorFlow's expert quickstart: the subclassed `MyModel`.

From tensorflow/docs site/en/tutorials/quickstart/advanced.ipynb: a
`keras.Model` subclass with a convolution, a flatten and two dense layers,
trained with Adam and sparse cross-entropy from logits (given here in
`compile_settings`, as the tutorial's loss and optimizer objects).
"""

import tf_keras as keras


class MyModel(keras.Model):
    def __init__(self, classes):
        super().__init__()
        self.conv1 = keras.layers.Conv2D(32, 3, activation="relu")
        self.flatten = keras.layers.Flatten()
        self.d1 = keras.layers.Dense(128, activation="relu")
        self.d2 = keras.layers.Dense(classes)

    def call(self, x):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


def build_model(spec):
    return MyModel(spec.label.num_classes)


def compile_settings(spec):
    return {
        "optimizer": keras.optimizers.Adam(),
        "loss": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        "metrics": [keras.metrics.SparseCategoricalAccuracy(name="accuracy")],
    }

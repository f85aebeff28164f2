"""keras-io's "Customizing what happens in fit()", going lower-level.

From keras-team/keras-io guides/customizing_what_happens_in_fit.py: a model
with its own `train_step` that computes its own loss and updates its own
trackers, listed in `metrics`, compiled with an optimizer only. It has no
`test_step`, so the test split is evaluated with Strategist's default loss and
metric (the record says so); the trackers, which Keras's `test_step` never
updates, are not reported. The guide's regression on random data becomes a
classification of the digits here, and the loss is averaged over the global batch
(`tf.nn.compute_average_loss`), as TensorFlow's custom-training tutorial does under a
strategy: with the guide's default reduction, TensorFlow refuses the loss under any
`tf.distribute` strategy.
"""

import tensorflow as tf
import tf_keras as keras


class CustomModel(keras.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.accuracy_metric = keras.metrics.SparseCategoricalAccuracy(name="accuracy")
        # Per-example losses averaged over the global batch, as a loss outside compile() must
        # be under tf.distribute (TensorFlow refuses the default reduction there).
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=keras.losses.Reduction.NONE
        )

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = tf.nn.compute_average_loss(self.loss_fn(y, y_pred))
        gradients = tape.gradient(loss, self.trainable_variables)
        self.optimizer.apply_gradients(zip(gradients, self.trainable_variables, strict=True))
        self.loss_tracker.update_state(loss)
        self.accuracy_metric.update_state(y, y_pred)
        return {"loss": self.loss_tracker.result(), "accuracy": self.accuracy_metric.result()}

    @property
    def metrics(self):
        return [self.loss_tracker, self.accuracy_metric]


def build_model(spec):
    inputs = keras.Input(shape=spec.single_feature.shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(64, activation="relu")(x)
    outputs = keras.layers.Dense(spec.label.num_classes)(x)
    model = CustomModel(inputs, outputs)
    model.compile(optimizer="adam")
    return model

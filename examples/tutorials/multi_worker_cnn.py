"""TensorFlow's multi-worker tutorial's CNN, as a model module.

From tensorflow/docs site/en/tutorials/distribute/multi_worker_with_keras.ipynb
(`mnist_setup.build_and_compile_cnn_model`): an `InputLayer`, a `Reshape` to
one channel, one convolution, a dense layer, ten logits, compiled in the
model builder with SGD. The tutorial builds for MNIST's 28 x 28 pixels; this
port sizes the same layers from the data's image.

    strategist train --strategy multi_worker_mirrored --workers 2 \
        --model-module examples/tutorials/multi_worker_cnn.py

The tutorial's rate is SGD(0.001) over 3 x 70 steps of MNIST; on the 1,400
examples of the bundled digits a rate of 0.05 learns in a few epochs.
"""

import tf_keras as keras


def build_model(spec):
    height, width = spec.single_feature.shape[:2]
    model = keras.Sequential(
        [
            keras.layers.InputLayer(input_shape=(height, width)),
            keras.layers.Reshape(target_shape=(height, width, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(spec.label.num_classes),
        ]
    )
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=keras.optimizers.SGD(learning_rate=0.05),
        metrics=["accuracy"],
    )
    return model


def preprocess(image, label):
    """The tutorial's model takes (height, width) pixels: the channel is dropped."""
    return image[..., 0], label

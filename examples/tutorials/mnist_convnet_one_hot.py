"""keras-io's simple MNIST convnet, with one-hot labels.

From keras-team/keras-io examples/vision/mnist_convnet.py: labels turned into
one-hot rows (`keras.utils.to_categorical` there, `tf.one_hot` in `preprocess`
here), two convolution and pooling blocks, dropout, a softmax, compiled with
categorical cross-entropy and Adam. `same` padding keeps the bundled 8 x 8
digits large enough for both poolings.
"""

import tensorflow as tf
import tf_keras as keras

NUM_CLASSES = 10


def build_model(spec):
    model = keras.Sequential(
        [
            keras.Input(shape=spec.single_feature.shape),
            keras.layers.Conv2D(32, kernel_size=(3, 3), padding="same", activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Conv2D(64, kernel_size=(3, 3), padding="same", activation="relu"),
            keras.layers.MaxPooling2D(pool_size=(2, 2)),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.5),
            keras.layers.Dense(spec.label.num_classes, activation="softmax"),
        ]
    )
    model.compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model


def preprocess(image, label):
    return image, tf.one_hot(label, NUM_CLASSES)

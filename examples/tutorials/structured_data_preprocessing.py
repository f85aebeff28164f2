"""TensorFlow's structured-data tutorial with Keras preprocessing layers.

From tensorflow/docs site/en/tutorials/structured_data/preprocessing_layers.ipynb:
one `Input` per column (a dict of inputs), `Normalization` for the numeric
columns and `StringLookup` + `CategoryEncoding` for the columns of words, each
adapted on the training split (`spec.training_data()`, where the tutorial
reads its own `train_ds`), then a dense layer, dropout and one logit.

    python examples/tutorials/tutorial_data.py runs/tutorial-data
    strategist train --data runs/tutorial-data/tumours.csv --label target \
        --model-module examples/tutorials/structured_data_preprocessing.py

Strategist adapts the layers once, before the cluster starts, and every task
and the export get the same vocabularies and statistics.
"""

import tensorflow as tf
import tf_keras as keras


def get_normalization_layer(name, dataset):
    normalizer = keras.layers.Normalization(axis=None)
    feature_ds = dataset.map(lambda x, y: x[name])
    normalizer.adapt(feature_ds)
    return normalizer


def get_category_encoding_layer(name, dataset, max_tokens=None):
    index = keras.layers.StringLookup(max_tokens=max_tokens)
    feature_ds = dataset.map(lambda x, y: x[name])
    index.adapt(feature_ds)
    encoder = keras.layers.CategoryEncoding(num_tokens=index.vocabulary_size())
    return lambda feature: encoder(index(feature))


def build_model(spec):
    train_ds = spec.training_data()
    all_inputs, encoded_features = {}, []
    for name, feature in spec.features.items():
        if feature.dtype == "string":
            column = keras.Input(shape=(1,), name=name, dtype="string")
            encoded = get_category_encoding_layer(name, train_ds)(column)
        else:
            column = keras.Input(shape=(1,), name=name)
            encoded = get_normalization_layer(name, train_ds)(column)
        all_inputs[name] = column
        encoded_features.append(encoded)
    all_features = keras.layers.concatenate(encoded_features)
    x = keras.layers.Dense(32, activation="relu")(all_features)
    x = keras.layers.Dropout(0.5)(x)
    output = keras.layers.Dense(1)(x)
    model = keras.Model(all_inputs, output)
    model.compile(
        optimizer="adam",
        loss=keras.losses.BinaryCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def preprocess(features, label):
    """One value per column, as the tutorial's `df_to_dataset` gives (shape (1,))."""
    return {name: tf.expand_dims(value, -1) for name, value in features.items()}, label

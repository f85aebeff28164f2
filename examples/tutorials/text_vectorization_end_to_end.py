"""keras-io's text classification from scratch, as an end-to-end model.

From keras-team/keras-io examples/nlp/text_classification_from_scratch.py: a
`TextVectorization` layer (lower case, punctuation stripped, int tokens,
fixed length) adapted on the training texts, an `Embedding`, a 1D
convolution, global max pooling and a sigmoid. The guide vectorizes in its
`tf.data` pipeline and builds the end-to-end model for inference after
training; here the layer is the model's first, so the model Strategist trains
and exports takes raw strings.

    python examples/tutorials/tutorial_data.py runs/tutorial-data
    strategist train --data runs/tutorial-data/reviews.csv --label positive \
        --model-module examples/tutorials/text_vectorization_end_to_end.py
"""

import tf_keras as keras

MAX_FEATURES = 200
EMBEDDING_DIM = 16
SEQUENCE_LENGTH = 12


def build_model(spec):
    vectorize_layer = keras.layers.TextVectorization(
        max_tokens=MAX_FEATURES, output_mode="int", output_sequence_length=SEQUENCE_LENGTH
    )
    text_ds = spec.training_data().map(lambda x, y: x)
    vectorize_layer.adapt(text_ds)

    inputs = keras.Input(shape=(), dtype="string")
    x = vectorize_layer(inputs)
    x = keras.layers.Embedding(MAX_FEATURES, EMBEDDING_DIM)(x)
    x = keras.layers.Dropout(0.5)(x)
    x = keras.layers.Conv1D(32, 3, padding="valid", activation="relu")(x)
    x = keras.layers.GlobalMaxPooling1D()(x)
    x = keras.layers.Dense(32, activation="relu")(x)
    predictions = keras.layers.Dense(1, activation="sigmoid", name="predictions")(x)
    model = keras.Model(inputs, predictions)
    model.compile(loss="binary_crossentropy", optimizer="adam", metrics=["accuracy"])
    return model

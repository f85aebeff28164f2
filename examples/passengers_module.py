"""A model with named inputs for titanic-like dict features (`features/age`, `features/fare`...).

    strategist train --dataset passengers --dataset-module my_builders.py \
        --model-module examples/passengers_module.py

`my_builders.py` is yours to write: it does not ship. It holds a TFDS builder named
`Passengers` whose supervised input `features` is a `FeaturesDict` with `age`, `fare`
(float32), `pclass` (a 3-class `ClassLabel`) and `name` (text), and whose label is a
2-class `ClassLabel`; `Passengers` in tests/test_user_data.py
is one to copy (examples/pen_digits_builder.py shows a builder module that ships).

A TFDS dataset whose input is a `FeaturesDict` reaches the model as a dict keyed by
the inner feature names; this model takes the numeric ones it names (age, fare and
the passenger class, one-hot) and leaves the rest (the name, a string) unused.
"""

import tf_keras as keras


def build_model(spec):
    age = keras.layers.Input(shape=(), name="age")
    fare = keras.layers.Input(shape=(), name="fare")
    pclass = keras.layers.Input(shape=(), name="pclass", dtype="int64")
    classes = spec.features["pclass"]  # int64 class ids of a ClassLabel
    assert classes.dtype == "int64"
    one_hot = keras.layers.CategoryEncoding(num_tokens=3, output_mode="one_hot")(pclass)
    numbers = keras.layers.Concatenate()(
        [keras.layers.Reshape((1,))(age), keras.layers.Reshape((1,))(fare)]
    )
    scaled = keras.layers.Rescaling(1 / 70)(numbers)
    hidden = keras.layers.Dense(32, activation="relu")(
        keras.layers.Concatenate()([scaled, one_hot])
    )
    outputs = keras.layers.Dense(spec.label.num_classes)(hidden)
    return keras.Model({"age": age, "fare": fare, "pclass": pclass}, outputs, name="passengers")

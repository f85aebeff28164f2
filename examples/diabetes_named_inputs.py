"""A model with named inputs: it takes the columns of diabetes.csv by name.

    python examples/csv_data.py runs/csv
    strategist train --data runs/csv/diabetes.csv --label progression \
        --model-module examples/diabetes_named_inputs.py

Its Keras inputs are named after CSV columns, so Strategist hands it those
columns by name (a dict) instead of the one float vector a single-input model
gets. It uses four of the ten columns; a regression with mean squared error.
"""

import tf_keras as keras

COLUMNS = ("age", "bmi", "bp", "s5")
TASK = "regression"


def build_model(spec):
    inputs = {name: keras.layers.Input(shape=(), name=name) for name in COLUMNS}
    stacked = keras.layers.Concatenate()(
        [keras.layers.Reshape((1,))(inputs[name]) for name in COLUMNS]
    )
    hidden = keras.layers.Dense(32, activation="relu")(stacked)
    return keras.Model(inputs, keras.layers.Dense(1)(hidden), name="diabetes_named_inputs")


def compile_settings(spec):
    return {
        "optimizer": keras.optimizers.Adam(0.05),
        "loss": "mse",
        "metrics": ["mae"],
    }

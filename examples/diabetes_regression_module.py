"""A user's regression model for Strategist: mean squared error on a float label.

    python examples/csv_data.py runs/csv       # scikit-learn's diabetes data, offline
    strategist train --strategy parameter_server \
        --data runs/csv/diabetes.csv --label progression \
        --model-module examples/diabetes_regression_module.py

The model of TensorFlow's "Parameter server training" tutorial is a regression
with MSE; this is that kind of model for a table of numeric columns, which
reach a single-input model as one float vector in column order. The label has
no classes, so the run is a regression: evaluated with MAE, RMSE and MSE, and
promotable on `test_mae`, `test_rmse` or `test_loss`.
"""

import tf_keras as keras

TASK = "regression"


def build_model(spec):
    """A small MLP on the one vector feature, one output; its bias starts near the label's mean."""
    columns = spec.single_feature.shape
    return keras.Sequential(
        [
            keras.layers.Input(shape=columns),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(16, activation="relu"),
            # Disease progression is about 150 on average: starting there spares the
            # optimizer the first hundreds of steps.
            keras.layers.Dense(1, bias_initializer=keras.initializers.Constant(150.0)),
        ],
        name="diabetes_mlp",
    )


def compile_settings(spec):
    """Adam at 0.01 for a batch of 32 (scaled by Strategist), MSE, and MAE to read."""
    return {
        "optimizer": keras.optimizers.Adam(learning_rate=0.01),
        "loss": keras.losses.MeanSquaredError(),
        "metrics": [keras.metrics.MeanAbsoluteError(name="mae")],
    }

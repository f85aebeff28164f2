"""The one container image every component and every training process runs.

Set at compile time (`strategist compile --image URI`); this is the default.
"""

DEFAULT_IMAGE = "us-docker.pkg.dev/strategist-project/strategist/trainer:0.1.0"

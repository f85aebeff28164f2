"""Importing TensorFlow in the CLI's own process without its C++ start-up lines.

Since TensorFlow 2.19, lines logged before `absl::InitializeLog()` (oneDNN,
"Could not find cuda drivers", "failed call to cuInit") ignore
`TF_CPP_MIN_LOG_LEVEL` (https://github.com/tensorflow/tensorflow/issues/100442)
and reach the console of any command that imports a user's module. Trainer
processes keep them: on a GPU machine they are how a missing driver shows.
"""

from __future__ import annotations

import os
import sys
import tempfile


def import_tensorflow_quietly() -> None:
    """Imports TensorFlow and finds its devices (the CUDA probe logs then) with standard
    error held back; what was held is shown only if that fails."""
    if "tensorflow" in sys.modules:
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as held:
        os.dup2(held.fileno(), 2)
        try:
            import tensorflow as tf

            tf.config.list_physical_devices()
        except BaseException:
            os.dup2(saved, 2)
            held.seek(0)
            sys.stderr.write(held.read().decode(errors="replace"))
            raise
        finally:
            os.dup2(saved, 2)
            os.close(saved)

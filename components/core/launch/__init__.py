"""Where training processes run: `local` (a localhost cluster), `vertex` (a Vertex AI
CustomJob), `kubeflow` (a TFJob). Every backend runs the same trainer entry point
with `TF_CONFIG` set the same way."""

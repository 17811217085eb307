"""Shared test set-up: quiet TensorFlow, tiny sizes."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

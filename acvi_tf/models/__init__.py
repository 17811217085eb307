"""Encoder, decoder (one step() for training and decoding), output heads, the seq2seq model."""

"""Peer benchmark: our Seq2Seq timed beside OpenNMT-tf (``make bench-peers``; see run.py)."""

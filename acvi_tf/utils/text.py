"""Whitespace tokenization shared by the data readers and the metrics."""

import re

# Tokens are separated by ASCII whitespace only. Python's str.split() would also
# split on U+00A0 and other Unicode spaces, which occur *inside* tokens of real
# files (the CNN/DailyMail vocab holds ". . ." joined by U+00A0) -- splitting
# there would break "token count" lines and shift every id after them.
_ASCII_WS = re.compile(r"[ \t\n\r\x0b\x0c]+")


def split_tokens(text):
    """Splits whitespace-tokenized text into tokens on ASCII whitespace."""
    return [t for t in _ASCII_WS.split(text) if t]

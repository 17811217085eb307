"""Atomic writes of JSON and text files (a temporary file renamed into place, so a
reader never sees half a file), reading JSON with the file named when it does not
parse, and generated markdown reports that keep the notes written by hand below
:data:`NOTES_MARKER`."""

import dataclasses
import json
import os

from acvi_tf.errors import RunError


def save_json(path, obj):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f, indent=2, sort_keys=True, ensure_ascii=False, default=_jsonable)
        f.write("\n")
    os.replace(tmp, path)


def load_json(path):
    """The JSON object in ``path``; a file that does not parse is a :class:`RunError`
    naming it (a stored config garbled by hand or by a full disk)."""
    with open(path, encoding="utf-8") as f:
        try:
            return json.load(f)
        except ValueError as e:
            raise RunError(f"{path} is not valid JSON ({e}); restore it or use a new "
                           f"--model_dir") from None


def _jsonable(obj):
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)
    if hasattr(obj, "item"):
        return obj.item()
    return str(obj)


def write_text(path, text):
    """Writes ``text`` (with a final newline) atomically: a temporary file renamed into place."""
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    os.replace(tmp, path)


NOTES_MARKER = ("<!-- Notes below this line are written by hand and kept when the report is "
                "regenerated. -->")


def write_report(path, text):
    """Writes a generated markdown report (:func:`write_text`), keeping whatever an existing
    ``path`` holds below :data:`NOTES_MARKER` (notes by hand) under the new text."""
    notes = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            old = f.read()
        if NOTES_MARKER in old:
            notes = old.split(NOTES_MARKER, 1)[1].lstrip("\n")
    write_text(path, "\n".join([text.rstrip(), "", NOTES_MARKER, "", notes]).rstrip())


def write_lines(path, lines):
    """One line per item, each ending in a newline, atomically: an empty last item (an
    empty hypothesis) keeps its line, so the file lines up with its references."""
    os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(f"{line}\n" for line in lines))
    os.replace(tmp, path)

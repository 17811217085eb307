"""Locating tools shipped inside installed Python packages (ROUGE-1.5.5, METEOR 1.5)."""

import importlib.util
import os


def package_subdir(package, subdir, error_cls, pin):
    """``<site-packages>/<package>/<subdir>``, or ``error_cls`` saying what to install."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise error_cls(f"the {package} package is not installed: pip install {pin}")
    return os.path.join(list(spec.submodule_search_locations)[0], subdir)

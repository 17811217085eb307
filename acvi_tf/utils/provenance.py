"""Which code produced an artefact: the git commit and whether the tree was dirty."""

import os
import subprocess

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def code_version(repo=REPO_ROOT):
    """``{"commit": sha, "dirty": bool}`` of the checkout at ``repo``, or None outside
    git (an installed package, no git binary)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    try:
        return {"commit": git("rev-parse", "HEAD"),
                "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}
    except (OSError, subprocess.SubprocessError):
        return None

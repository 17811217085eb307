"""What the official metrics and the data need, and the one command that installs each.

Run by ``make install`` (after pip) and on its own: ``python -m acvi_tf.setup_check``.
It never fails the install: it prints what works, what is missing, the command that
fixes it, and which tests and table columns are skipped until then. ``--strict``
exits 1 when anything is missing (CI uses the plain form). It also lists the GPUs
TensorFlow sees (none is no failure: the cpu and smoke profiles need none; the paper
profile refuses to train without one, :mod:`acvi_tf.utils.gpus`).
"""

import argparse
import os
import sys

APT_METRICS = ("apt-get update && apt-get install -y --no-install-recommends perl "
               "libxml-parser-perl default-jre-headless")


def checks():
    """``[(name, problem or None, fix, what is skipped without it)]``."""
    from acvi_tf.data import sources
    from acvi_tf.metrics import meteor, rouge
    out = [("ROUGE-1.5.5 (Perl with XML::Parser and DB_File)", rouge.missing_requirements(),
            APT_METRICS, "ROUGE in Tables 1, 2, 3 and 5 and the ROUGE tests"),
           ("METEOR 1.5 and CIDEr's tokenizer (a Java runtime)", meteor.missing_requirements(),
            APT_METRICS, "METEOR in Tables 1 and 3, CIDEr-D's PTB tokenizer and their tests")]
    mirror = sources.mirror_dir()
    problem = None
    if not mirror or not os.path.isdir(mirror):
        problem = ("no data mirror: $ACVI_DATA_MIRROR is not set and ../shared/data does not "
                   "exist")
    out.append(("the data mirror", problem,
                "export ACVI_DATA_MIRROR=/path/to/data (a folder laid out as ../shared/data; "
                "see its README)", "every test and make target that reads real data"))
    return out


def gpu_lines(found=None):
    """The report's lines on the GPUs TensorFlow sees (``found``: tests pass the list)."""
    from acvi_tf.utils import gpus
    try:
        found = gpus.visible_gpus() if found is None else found
    except Exception as e:  # noqa: BLE001  (a broken CUDA install must not hide the rest)
        return [f"  warning  GPUs: TensorFlow could not list them: {str(e).splitlines()[0]}"]
    if not found:
        return ["  info     GPUs TensorFlow sees: none (the cpu and smoke profiles need none; "
                f"--profile=paper does: {gpus.GPU_INSTALL} on a machine with an NVIDIA GPU)"]
    return [f"  ok       GPUs TensorFlow sees: {len(found)}"] + [f"           {g}" for g in found]


def report(stream=None):
    stream = stream or sys.stdout
    missing = 0
    print("set-up check (python -m acvi_tf.setup_check):", file=stream)
    for line in gpu_lines():
        print(line, file=stream)
    for name, problem, fix, skipped in checks():
        if problem is None:
            print(f"  ok       {name}", file=stream)
            continue
        missing += 1
        print(f"  MISSING  {name}: {problem}\n           fix: {fix}\n"
              f"           skipped until then: {skipped}", file=stream)
    return missing


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--strict", action="store_true", help="exit 1 if anything is missing")
    args = parser.parse_args(argv)
    missing = report()
    return 1 if (missing and args.strict) else 0


if __name__ == "__main__":
    sys.exit(main())

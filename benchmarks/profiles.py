"""What ``make bench`` runs: the sizes (model, batch, beam search), the profiles that group
them, and the variants timed (every registered attention variant and
:data:`MODEL_VARIANTS`, the baseline first)."""

import dataclasses

BASELINE = "soft"


@dataclasses.dataclass(frozen=True)
class Size:
    """One benchmark size: the model, the training batch and the beam-search setting."""
    model: dict            # ModelConfig fields except ``attention``
    batch: int             # training batch (sequences)
    src_len: int           # source tokens per sequence
    tgt_len: int           # target tokens per sequence (end token included)
    beam_width: int
    beam_batch: int        # source sequences per beam-search call
    beam_max_length: int


TRANSLATION_MODEL = dict(  # IWSLT'15 En-Vi, Luong-style (Section 4.1)
    src_vocab_size=17191, tgt_vocab_size=7709, embed_dim=256,
    encoder_units=256, encoder_layers=2, decoder_units=256, decoder_layers=2,
    score="multiplicative", head_units=256)
SUMMARIZATION_MODEL = dict(  # CNN/Daily Mail, See et al.-style (Section 4.2)
    src_vocab_size=50000, tgt_vocab_size=50000, embed_dim=128,
    encoder_units=256, encoder_layers=1, decoder_units=256, decoder_layers=1,
    score="additive", attention_units=256, head_units=256)
# What `make table4-cpu` trains (experiments/translate.py's "cpu" profile, which
# "cpu_converged" keeps): Multi30k En->De with its vocabularies (min count 2).
TABLE4_CPU_MODEL = dict(
    src_vocab_size=5921, tgt_vocab_size=7859, embed_dim=256,
    encoder_units=128, encoder_layers=1, decoder_units=256, decoder_layers=1,
    score="multiplicative", attention_units=256, head_units=256, dropout=0.2)
TOY_MODEL = dict(src_vocab_size=40, tgt_vocab_size=50, embed_dim=8, encoder_units=8,
                 decoder_units=8, attention_units=8, head_units=8)


@dataclasses.dataclass(frozen=True)
class Profile:
    sizes: dict            # name -> Size
    default_sizes: tuple   # what runs without --sizes
    warmup: int            # untimed steps after the first (tracing/compiling) call
    steps: int             # timed steps per variant
    beam_reps: int         # timed beam-search calls per variant
    xla: str               # default --xla
    beam_xla: str          # default --beam_xla
    isolate: bool          # default --isolate: a worker process per (size, XLA) group
    matmul_n: int
    matmul_reps: int


PROFILES = {
    "full": Profile(
        sizes={
            "translation": Size(TRANSLATION_MODEL, batch=128, src_len=50, tgt_len=50,
                                beam_width=10, beam_batch=32, beam_max_length=50),
            "summarization": Size(SUMMARIZATION_MODEL, batch=16, src_len=400, tgt_len=100,
                                  beam_width=5, beam_batch=4, beam_max_length=100),
        },
        default_sizes=("translation", "summarization"),
        # The first call already runs one step: it is the warm-up.
        warmup=0, steps=3, beam_reps=2, xla="both", beam_xla="both", isolate=True,
        matmul_n=2048, matmul_reps=5),
    # The paper's widths and vocabularies; batch and lengths cut. XLA off by default:
    # its compiles (20-70 s per variant on 2 cores) would dominate.
    "quick": Profile(
        sizes={
            "translation": Size(TRANSLATION_MODEL, batch=16, src_len=12, tgt_len=12,
                                beam_width=10, beam_batch=2, beam_max_length=8),
            "summarization": Size(SUMMARIZATION_MODEL, batch=2, src_len=60, tgt_len=12,
                                  beam_width=5, beam_batch=1, beam_max_length=8),
        },
        default_sizes=("translation", "summarization"),
        warmup=1, steps=3, beam_reps=2, xla="off", beam_xla="off", isolate=True,
        matmul_n=1024, matmul_reps=3),
    "smoke": Profile(
        sizes={
            "translation": Size(dict(TOY_MODEL, score="multiplicative"), batch=4, src_len=6,
                                tgt_len=5, beam_width=2, beam_batch=2, beam_max_length=4),
            "summarization": Size(dict(TOY_MODEL, score="additive"), batch=2, src_len=9,
                                  tgt_len=4, beam_width=2, beam_batch=1, beam_max_length=4),
        },
        default_sizes=("translation",),
        warmup=0, steps=2, beam_reps=1, xla="off", beam_xla="off", isolate=False,
        matmul_n=256, matmul_reps=3),
}


# Benchmarked beside the attention variants, by ModelConfig fields: other architectures
# and the latents outside attention (on soft attention, so the ratio is the latent's cost).
MODEL_VARIANTS = {"transformer": {"model": "transformer", "attention": BASELINE},
                  "ved": {"latent": "ved", "attention": BASELINE},
                  "vrnmt": {"latent": "vrnmt", "attention": BASELINE}}


def variant_config(size, variant, precision="float32"):
    """The ModelConfig of one benchmarked variant at one size and precision."""
    from acvi_tf.models.seq2seq import ModelConfig
    fields = MODEL_VARIANTS.get(variant, {"attention": variant})
    return ModelConfig(**{**size.model, **fields, "precision": precision})



def select(text, choices, what):
    """The comma-separated names of ``text``, each one of ``choices`` (else SystemExit)."""
    names = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in names if x not in choices]
    if unknown:
        raise SystemExit(f"unknown {what}: {', '.join(unknown)}; choose from {', '.join(choices)}")
    return names


def planned_variants(names=None):
    """The variants a run times: ``names`` (comma-separated) or every registered attention
    variant and :data:`MODEL_VARIANTS`; the baseline first, always."""
    from acvi_tf import attention
    registered = list(attention.available()) + list(MODEL_VARIANTS)
    variants = select(names, registered, "variant") if names else registered
    return [BASELINE] + [v for v in variants if v != BASELINE]

"""The frame features of a captioning run: the feature store opened (or labelled
SYNTHETIC features), its coverage of the clips checked, its status for a dry run, the
extraction of features from the videos (``--mode=extract_features``) and the recipe
every missing-features stop prints. The task is :mod:`acvi_tf.tasks.captioning`."""

import os
import warnings

from acvi_tf.data import msvd
from acvi_tf.data import video_features as vf
from acvi_tf.errors import ConfigError, RunError
from acvi_tf.utils.progress import log

CLI = "experiments.caption"
DEFAULT_FEATURES = os.path.join("data", "msvd", "googlenet_pool5")
DEFAULT_VIDEOS = os.path.join("data", "msvd", "YouTubeClips")
SYNTHETIC_BANNER = (
    "!" * 78 + "\n"
    "!!  SYNTHETIC FEATURES: random vectors, not computed from any video.\n"
    "!!  The scores below test the pipeline only and say NOTHING about the paper.\n"
    + "!" * 78)


def how_to_make_features(features=DEFAULT_FEATURES):
    """What to produce and how (the message of every missing-features stop)."""
    return (
        "Real features are the GoogLeNet pool5/7x7_s1 vectors of 24 frames per clip "
        "(Section 4.2). To make them:\n"
        f"  1. videos: unpack YouTubeClips.tar ({msvd.MSVD.homepage}) into {DEFAULT_VIDEOS}/\n"
        "  2. weights: bvlc_googlenet.caffemodel + deploy.prototxt (BVLC Caffe model zoo), "
        "converted with pycaffe:\n"
        "       net = caffe.Net('deploy.prototxt', 'bvlc_googlenet.caffemodel', caffe.TEST)\n"
        "       np.savez('bvlc_googlenet.npz', **{f'{n}/{i}': p.data for n, ps in "
        "net.params.items() for i, p in enumerate(ps)})\n"
        "     (or a caffe-tensorflow .npy)\n"
        "  3. a video decoder: pip install opencv-python-headless\n"
        f"  4. python -m {CLI} --mode=extract_features --videos={DEFAULT_VIDEOS} "
        f"--cnn_weights=bvlc_googlenet.npz --features={features}\n"
        "Or run the pipeline on labelled synthetic features: --synthetic_features "
        "(make table3-smoke); those numbers are not results.")


class FeaturesMissing(Exception):
    """No usable feature store; the message says what to produce and how."""


def open_features(features, synthetic, log=None):
    """The feature source of a run: a FeatureStore, or SyntheticFeatures (loudly)."""
    if synthetic and features:
        raise ConfigError("synthetic_features", f"give either --features={features} or "
                        f"--synthetic_features, not both")
    if synthetic:
        if log:
            log(SYNTHETIC_BANNER)
        return vf.SyntheticFeatures(warn=False)
    if not features:
        raise FeaturesMissing("no --features store given (and no --synthetic_features).\n"
                              + how_to_make_features())
    if not os.path.exists(os.path.join(features, vf.INDEX_FILE)):
        raise FeaturesMissing(f"--features={features}: no feature store there (missing "
                              f"{vf.INDEX_FILE}). MSVD videos and CNN features are not on "
                              f"this machine.\n" + how_to_make_features(features))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", vf.SyntheticFeaturesWarning)
        store = vf.FeatureStore.open(features)
    if not store.pretrained and log:
        log(f"WARNING: {features} holds {'synthetic' if store.synthetic else 'random-CNN'} "
            f"features; the scores are NOT results.")
    return store


def check_coverage(store, clips, where):
    """Raises FeaturesMissing naming the clips of ``where`` without features."""
    missing = [c for c in clips if c not in store]
    if missing:
        root = getattr(store, "root", "the feature store")
        raise FeaturesMissing(f"{root}: {len(missing)} of the {len(clips)} {where} clips have "
                              f"no features (e.g. {', '.join(missing[:5])}); rerun "
                              f"--mode=extract_features (it resumes) or check the videos.\n"
                              + how_to_make_features(root))


def features_status(features, synthetic, scheme="paper"):
    """``(ok, lines)``: does the feature source cover every clip of the split scheme?"""
    if synthetic:
        return True, ["  features: SYNTHETIC (random; the numbers are not results)"]
    try:
        store = open_features(features, False)
        for split, clips in msvd.split_clips(scheme).items():
            check_coverage(store, clips, f"{scheme} {split}")
    except FeaturesMissing as e:
        return False, [f"  MISSING  features: {str(e).splitlines()[0]}"]
    kind = "pretrained" if store.pretrained else "NOT pretrained (random CNN)"
    return True, [f"  ok       features: {features} ({len(store)} clips, {kind}, "
                  f"{store.metadata.get('feature')})"]



def extract_features(features, videos, cnn_weights, allow_random_cnn=False, progress=False,
                     log=log):
    """Videos -> GoogLeNet pool5 features of 24 frames per clip -> the feature store."""
    if not features:
        raise ConfigError("features", "is required: the feature store to write")
    if not cnn_weights and not allow_random_cnn:
        raise ConfigError("cnn_weights", "is required: the BVLC GoogLeNet weights.\n"
                          + how_to_make_features(features))
    if cnn_weights and not os.path.exists(cnn_weights):
        raise ConfigError("cnn_weights", f"file not found: {cnn_weights}")
    paths, missing = msvd.video_paths(videos)
    if missing:
        log(f"{videos}: {len(missing)} of {len(missing) + len(paths)} clips have no video "
            f"file (e.g. {', '.join(missing[:5])}); they get no features")
    if not paths:
        raise RunError(f"no MSVD video found in {videos}\n"
                   + how_to_make_features(features))
    model = vf.GoogLeNetFeatures(cnn_weights)
    store = vf.FeatureStore.create(features, weights=model.weights_source)
    todo = [c for c in paths if c not in store]
    log(f"extracting {len(todo)} clips ({len(paths) - len(todo)} already in {features})")
    done = vf.extract_features(vf.iter_video_files({c: paths[c] for c in todo}), model, store,
                               progress=lambda c: log(f"  {c}") if progress else None)
    log(f"{features}: {done} clips extracted, {len(store)} in the store")
    return 0

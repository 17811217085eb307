"""Video-frame features for the captioning experiment (Section 4.2).

The paper: "we process only the first 240 frames of each video ... we employ a
pretrained GoogLeNet CNN (implementation provided in Caffe) ... we use the features
extracted at the pool5/7x7_s1 layer ... We select 24 equally-spaced frames out of
the first 240 from each video ... to obtain a 1024 dimensional frame-wise feature
vector." This module provides each piece:

* :func:`sample_frame_indices` -- which 24 frames (defined exactly below);
* :class:`GoogLeNetFeatures` -- frames through the BVLC GoogLeNet of
  :mod:`acvi_tf.models.googlenet` (cut at ``pool5/7x7_s1``), with weights from a Keras
  ``.weights.h5`` or from Caffe-named numpy arrays;
* :class:`FeatureStore` -- one ``[24, 1024]`` ``.npy`` per clip plus ``index.json``,
  every file written atomically;
* :func:`extract_features` -- frames -> features -> store;
* SYNTHETIC features (:func:`write_synthetic_store`, :class:`SyntheticFeatures`):
  deterministic random features per clip, loudly marked, for running the pipeline
  on machines that have no videos. Numbers obtained with them are not results.

No video, no CNN feature file and no pretrained weight exists on the development
machines; real features need the MSVD videos (``YouTubeClips.tar``) and the BVLC
GoogLeNet caffemodel, both obtained by the user.
"""

import hashlib
import itertools
import json
import logging
import os
import re
import warnings

import numpy as np

from acvi_tf.models.googlenet import (IMAGE_SIZE,  # noqa: F401
                                     build_googlenet, caffe_arrays_to_keras,
                                     read_caffe_arrays)

log = logging.getLogger(__name__)

NUM_FRAMES = 24        # frames per clip fed to the encoder (Section 4.2)
FRAME_WINDOW = 240     # only the first 240 frames of a video are used
FEATURE_DIM = 1024     # GoogLeNet pool5/7x7_s1
FEATURE_NAME = "bvlc_googlenet/pool5/7x7_s1"
RANDOM_INIT = "random-init (NOT pretrained)"


# --------------------------------------------------------------------------------------
# Frame sampling
# --------------------------------------------------------------------------------------

def sample_frame_indices(num_frames, num_samples=NUM_FRAMES, window=FRAME_WINDOW):
    """The 24 frame indices of Section 4.2: equally spaced over the first 240 frames.

    With ``w = min(num_frames, window)`` the window is cut into ``num_samples``
    equal segments and the first frame of each is taken:
    ``index_i = floor(i * w / num_samples)``, ``i = 0 .. num_samples-1``.
    For a video of at least 240 frames this is ``0, 10, 20, ..., 230`` (stride 10).
    A shorter video is spread over the frames it has (``w = 100``:
    ``0, 4, 8, 12, 16, 20, 25, ...``), and a video with fewer than 24 frames repeats
    frames (``w = 12``: ``0, 0, 1, 1, ...``) so that every clip still yields exactly
    ``num_samples`` feature vectors (no padding mask is needed downstream).
    """
    num_frames = int(num_frames)
    if num_frames <= 0:
        raise ValueError(f"a video needs at least one frame, got num_frames={num_frames}")
    if num_samples <= 0 or window <= 0:
        raise ValueError(f"num_samples and window must be positive, got {num_samples}, {window}")
    w = min(num_frames, window)
    return [(i * w) // num_samples for i in range(num_samples)]


def prepare_frames(frames, size=IMAGE_SIZE, mode="resize"):
    """RGB frames ``[n, H, W, 3]`` (uint8 or float in [0, 255]) -> float32 ``[n, size, size, 3]``.

    ``mode="resize"`` squashes the whole frame to ``size x size`` (bilinear), keeping
    the full field of view; ``mode="center_crop"`` resizes to 256x256 and takes the
    central 224x224, as Caffe's ``classify.py`` does at test time. The paper does
    not say which; ``resize`` is the default.
    """
    import keras

    x = np.asarray(frames)
    if x.ndim != 4 or x.shape[-1] != 3:
        raise ValueError(f"frames must be [n, H, W, 3] RGB, got shape {x.shape}")
    x = x.astype("float32")
    if mode == "resize":
        if x.shape[1:3] != (size, size):
            x = np.asarray(keras.ops.image.resize(x, (size, size), interpolation="bilinear"))
    elif mode == "center_crop":
        big = round(size * 256 / 224)
        if x.shape[1:3] != (big, big):
            x = np.asarray(keras.ops.image.resize(x, (big, big), interpolation="bilinear"))
        o = (big - size) // 2
        x = x[:, o:o + size, o:o + size]
    else:
        raise ValueError(f"mode must be 'resize' or 'center_crop', got {mode!r}")
    return x.astype("float32")


class GoogLeNetFeatures:
    """Frames -> GoogLeNet ``pool5/7x7_s1`` features ``[n, 1024]`` (Section 4.2).

    ``weights``: a file for :meth:`load_weights`, or None for random weights (useful
    only for tests; features are then marked ``random-init`` in the store).
    Weight files:

    * ``*.weights.h5`` -- Keras 3 weights of exactly this model (``save_weights``);
      the fast path once converted.
    * ``*.npz`` / ``*.npy`` -- BVLC Caffe parameters keyed by Caffe layer names, see
      :func:`read_caffe_arrays` and :func:`caffe_arrays_to_keras`.
    """

    feature_name = FEATURE_NAME
    dim = FEATURE_DIM

    def __init__(self, weights=None, seed=0, batch_size=24, mode="resize"):
        self.model = build_googlenet(seed=seed)
        self.batch_size = batch_size
        self.mode = mode
        self.weights_source = RANDOM_INIT
        if weights is not None:
            self.load_weights(weights)

    def load_weights(self, path, layout="auto", allow_pickle=False):
        if not os.path.exists(path):
            raise FileNotFoundError(f"GoogLeNet weights file not found: {path}")
        if path.endswith(".weights.h5"):
            self.model.load_weights(path)
        else:
            arrays = read_caffe_arrays(path, allow_pickle=allow_pickle)
            for name, values in caffe_arrays_to_keras(self.model, arrays, layout,
                                                      source=path).items():
                self.model.get_layer(name).set_weights(values)
        self.weights_source = os.path.abspath(path)

    def save_weights(self, path):
        """Writes Keras weights (``path`` must end in ``.weights.h5``)."""
        if not path.endswith(".weights.h5"):
            raise ValueError(f"{path}: Keras 3 weight files must end in '.weights.h5'")
        self.model.save_weights(path)

    def __call__(self, frames):
        x = prepare_frames(frames, mode=self.mode)
        out = [np.asarray(self.model(x[i:i + self.batch_size], training=False))
               for i in range(0, len(x), self.batch_size)]
        return np.concatenate(out, 0).astype("float32")


# --------------------------------------------------------------------------------------
# Feature store
# --------------------------------------------------------------------------------------

STORE_FORMAT = "acvi_tf.feature_store/1"
INDEX_FILE = "index.json"
SYNTHETIC_WARNING = ("SYNTHETIC random features: not computed from any video. Numbers "
                     "obtained with them test the pipeline only and are NOT results.")
_CLIP_ID = re.compile(r"^[A-Za-z0-9_\-][A-Za-z0-9_.\-]*$")


class SyntheticFeaturesWarning(UserWarning):
    """Features are synthetic (or from an untrained CNN): not for reporting results."""


def _atomic_write(path, write):
    """Writes via ``<path>.tmp.<pid>`` + ``os.replace``: readers never see half a file."""
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


class FeatureStore:
    """A folder of per-clip features: ``<clip_id>.npy`` (``[num_frames, dim]`` float32)
    plus ``index.json`` (metadata and the clips written).

    A clip counts as stored only once it is in the index, so a run killed between
    writing a ``.npy`` and the next index flush just recomputes that clip. Metadata:
    ``feature`` (e.g. ``bvlc_googlenet/pool5/7x7_s1``), ``num_frames``, ``dim``,
    ``weights`` (the CNN weight file, or ``random-init``), ``synthetic`` (bool) and,
    for synthetic stores, a ``WARNING`` text. Opening a synthetic or random-init
    store emits :class:`SyntheticFeaturesWarning`.
    """

    def __init__(self, root, metadata, clips):
        self.root = root
        self.metadata = metadata
        self._clips = clips
        self._dirty = False

    @classmethod
    def create(cls, root, feature=FEATURE_NAME, num_frames=NUM_FRAMES, dim=FEATURE_DIM,
               synthetic=False, weights=None, exist_ok=True, **extra):
        """A new store at ``root``; an existing compatible one is reopened if ``exist_ok``."""
        if os.path.exists(os.path.join(root, INDEX_FILE)):
            if not exist_ok:
                raise FileExistsError(f"{root}: a feature store already exists")
            store = cls.open(root, warn=False)
            want = {"feature": feature, "num_frames": num_frames, "dim": dim,
                    "synthetic": bool(synthetic)}
            have = {k: store.metadata.get(k) for k in want}
            if have != want:
                raise ValueError(f"{root}/{INDEX_FILE}: existing store has {have}, asked for {want}")
            store._warn_if_not_real()
            return store
        os.makedirs(root, exist_ok=True)
        meta = {"format": STORE_FORMAT, "feature": feature, "num_frames": int(num_frames),
                "dim": int(dim), "dtype": "float32", "synthetic": bool(synthetic),
                "weights": weights, **extra}
        if synthetic:
            meta["WARNING"] = SYNTHETIC_WARNING
        store = cls(root, meta, {})
        store._dirty = True
        store.flush()
        return store

    @classmethod
    def open(cls, root, warn=True):
        path = os.path.join(root, INDEX_FILE)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: no feature store here (missing {INDEX_FILE})")
        try:
            with open(path) as f:
                index = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from e
        if index.get("format") != STORE_FORMAT:
            raise ValueError(f"{path}: format {index.get('format')!r}, expected {STORE_FORMAT!r}")
        clips = index.pop("clips", {})
        store = cls(root, index, clips)
        if warn:
            store._warn_if_not_real()
        return store

    @property
    def synthetic(self):
        return bool(self.metadata.get("synthetic"))

    @property
    def pretrained(self):
        """False for synthetic stores and for features from a randomly initialised CNN."""
        w = self.metadata.get("weights")
        return not self.synthetic and bool(w) and w != RANDOM_INIT

    def _warn_if_not_real(self):
        if self.synthetic:
            msg = f"{self.root}: {SYNTHETIC_WARNING}"
        elif self.metadata.get("weights") == RANDOM_INIT:
            msg = (f"{self.root}: features from a randomly initialised GoogLeNet (no "
                   f"pretrained weights); numbers obtained with them are NOT results.")
        else:
            return
        log.warning(msg)
        warnings.warn(msg, SyntheticFeaturesWarning, stacklevel=3)

    def provenance(self):
        """What experiments should record next to any score computed from this store."""
        return {"features": self.metadata.get("feature"), "store": os.path.abspath(self.root),
                "synthetic": self.synthetic, "weights": self.metadata.get("weights"),
                "pretrained": self.pretrained}

    def _path(self, clip_id):
        if not isinstance(clip_id, str) or not _CLIP_ID.match(clip_id):
            raise ValueError(f"bad clip id {clip_id!r} (letters, digits, '_', '-', '.')")
        return os.path.join(self.root, clip_id + ".npy")

    def __contains__(self, clip_id):
        return clip_id in self._clips

    def __len__(self):
        return len(self._clips)

    def clip_ids(self):
        return sorted(self._clips)

    def info(self, clip_id):
        return self._clips[clip_id]

    def put(self, clip_id, features, info=None, flush=True):
        arr = np.asarray(features, dtype="float32")
        want = (self.metadata["num_frames"], self.metadata["dim"])
        if arr.shape != want:
            raise ValueError(f"{self.root}: clip {clip_id}: features {arr.shape}, store holds {want}")
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{self.root}: clip {clip_id}: features contain NaN or inf")
        _atomic_write(self._path(clip_id), lambda f: np.save(f, arr, allow_pickle=False))
        self._clips[clip_id] = dict(info or {})
        self._dirty = True
        if flush:
            self.flush()

    def flush(self):
        """Writes ``index.json`` atomically (a no-op when nothing changed)."""
        if not self._dirty:
            return
        index = {**self.metadata, "clips": self._clips}
        data = json.dumps(index, indent=1, sort_keys=True).encode()
        _atomic_write(os.path.join(self.root, INDEX_FILE), lambda f: f.write(data))
        self._dirty = False

    def get(self, clip_id):
        if clip_id not in self._clips:
            raise KeyError(f"{self.root}: no features for clip {clip_id!r}")
        path = self._path(clip_id)
        arr = np.load(path, allow_pickle=False)
        want = (self.metadata["num_frames"], self.metadata["dim"])
        if arr.shape != want:
            raise ValueError(f"{path}: shape {arr.shape}, store index says {want}")
        return arr

    def get_batch(self, clip_ids):
        """``[len(clip_ids), num_frames, dim]`` float32."""
        return np.stack([self.get(c) for c in clip_ids])

    def missing(self, clip_ids):
        return [c for c in clip_ids if c not in self._clips]


# --------------------------------------------------------------------------------------
# Extraction
# --------------------------------------------------------------------------------------

def _first_frames(frames, window):
    """(indexable frames, number available) reading at most ``window`` frames."""
    if hasattr(frames, "__len__") and hasattr(frames, "__getitem__"):
        return frames, len(frames)
    head = list(itertools.islice(iter(frames), window))
    return head, len(head)


def extract_features(video_frames_iter, model, store, num_samples=NUM_FRAMES,
                     window=FRAME_WINDOW, overwrite=False, flush_every=25, progress=None):
    """Fills ``store`` with ``model`` features of the sampled frames of each video.

    Args:
      video_frames_iter: yields ``(clip_id, frames)``; ``frames`` is an RGB uint8
        array ``[T, H, W, 3]``, a list of ``[H, W, 3]`` frames, or an iterator of them
        (only the first ``window`` frames are read).
      model: a :class:`GoogLeNetFeatures`, or any callable mapping RGB frames
        ``[n, 224, 224, 3]`` to ``[n, dim]``.
      store: a :class:`FeatureStore` (not synthetic).
      overwrite: recompute clips already in the store (default: skip them, so an
        interrupted run resumes).

    Frames: :func:`sample_frame_indices` (24 out of the first 240). Each clip's
    index entry records how many frames were read and which were used.
    Returns the number of clips extracted.
    """
    if store.synthetic:
        raise ValueError(f"{store.root}: a synthetic store cannot receive real features")
    # Record which CNN weights made the features; never mix two in one store.
    weights = getattr(model, "weights_source", None) or f"unknown ({type(model).__name__})"
    have = store.metadata.get("weights")
    if have is None:
        store.metadata["weights"] = weights
        store._dirty = True
    elif have != weights:
        raise ValueError(f"{store.root}: store holds features from weights {have!r}, "
                         f"the model has {weights!r}")
    done = 0
    for clip_id, frames in video_frames_iter:
        if clip_id in store and not overwrite:
            continue
        frames, n = _first_frames(frames, window)
        if n == 0:
            raise ValueError(f"clip {clip_id}: the video has no frames")
        idx = sample_frame_indices(n, num_samples, window)
        sel = np.stack([np.asarray(frames[i]) for i in idx])
        feats = np.asarray(model(prepare_frames(sel)), dtype="float32")
        store.put(clip_id, feats, info={"frames_read": min(n, window), "indices": idx},
                  flush=False)
        done += 1
        if flush_every and done % flush_every == 0:
            store.flush()
        if progress:
            progress(clip_id)
    store.flush()
    return done


# --------------------------------------------------------------------------------------
# SYNTHETIC features (no videos on this machine)
# --------------------------------------------------------------------------------------

def synthetic_clip_features(clip_id, num_frames=NUM_FRAMES, dim=FEATURE_DIM, seed=0):
    """Deterministic random ``[num_frames, dim]`` features for one clip. SYNTHETIC.

    Seeded by (``seed``, SHA-256 of ``clip_id``), so every machine and run gives the
    same array for the same clip (Python's ``hash`` is salted per process and is not
    used). Non-negative, like average-pooled ReLU outputs.
    """
    h = int.from_bytes(hashlib.sha256(str(clip_id).encode()).digest()[:8], "little")
    rng = np.random.default_rng([int(seed), h])
    return np.abs(rng.standard_normal((num_frames, dim))).astype("float32")


def write_synthetic_store(root, clip_ids, seed=0, num_frames=NUM_FRAMES, dim=FEATURE_DIM):
    """A :class:`FeatureStore` of SYNTHETIC features, marked ``"synthetic": true``."""
    store = FeatureStore.create(root, feature=f"SYNTHETIC(seed={seed})", num_frames=num_frames,
                                dim=dim, synthetic=True, weights=None, seed=int(seed))
    for c in clip_ids:
        if c not in store:
            store.put(c, synthetic_clip_features(c, num_frames, dim, seed), flush=False)
    store.flush()
    return store


class SyntheticFeatures:
    """In-memory SYNTHETIC features with the read API of :class:`FeatureStore`.

    For smoke runs and tests that need no files. Warns on creation.
    """

    synthetic = True
    pretrained = False

    def __init__(self, num_frames=NUM_FRAMES, dim=FEATURE_DIM, seed=0, warn=True):
        self.metadata = {"feature": f"SYNTHETIC(seed={seed})", "num_frames": num_frames,
                         "dim": dim, "synthetic": True, "WARNING": SYNTHETIC_WARNING}
        self.seed = seed
        if warn:
            log.warning(SYNTHETIC_WARNING)
            warnings.warn(SYNTHETIC_WARNING, SyntheticFeaturesWarning, stacklevel=2)

    def __contains__(self, clip_id):
        return True

    def get(self, clip_id):
        return synthetic_clip_features(clip_id, self.metadata["num_frames"],
                                       self.metadata["dim"], self.seed)

    def get_batch(self, clip_ids):
        return np.stack([self.get(c) for c in clip_ids])

    def provenance(self):
        return {"features": self.metadata["feature"], "store": None, "synthetic": True,
                "weights": None, "pretrained": False}


# --------------------------------------------------------------------------------------
# Video decoding (optional dependency)
# --------------------------------------------------------------------------------------

def read_video_frames(path, max_frames=FRAME_WINDOW):
    """The first ``max_frames`` frames of a video file as RGB uint8 ``[T, H, W, 3]``.

    Needs OpenCV (``pip install opencv-python-headless``) or imageio with ffmpeg
    (``pip install imageio imageio-ffmpeg``); neither is a dependency of acvi_tf.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"video not found: {path}")
    try:
        import cv2
    except ImportError:
        cv2 = None
    if cv2 is not None:
        cap = cv2.VideoCapture(path)
        frames = []
        try:
            while len(frames) < max_frames:
                ok, bgr = cap.read()
                if not ok:
                    break
                frames.append(bgr[:, :, ::-1])
        finally:
            cap.release()
    else:
        try:
            import imageio.v3 as iio
        except ImportError:
            raise ImportError(
                f"cannot decode {path}: video decoding needs OpenCV "
                "(pip install opencv-python-headless) or imageio with ffmpeg "
                "(pip install imageio imageio-ffmpeg); neither is installed") from None
        frames = [f for f in itertools.islice(iio.imiter(path), max_frames)]
    if not frames:
        raise ValueError(f"{path}: no frame could be decoded")
    return np.stack(frames).astype("uint8")


def iter_video_files(paths, max_frames=FRAME_WINDOW):
    """``{clip_id: video path}`` -> ``(clip_id, frames)`` for :func:`extract_features`."""
    for clip_id, path in paths.items():
        yield clip_id, read_video_frames(path, max_frames)

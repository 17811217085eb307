"""Frame sampling, the Keras GoogLeNet, weight loading, the feature store, synthetic mode."""

import json
import os
import warnings

import numpy as np
import pytest

from acvi_tf.data import video_features as vf
from acvi_tf.models import googlenet


# ----------------------------------------------------------------------- sampling

def test_frame_indices_exact():
    assert vf.sample_frame_indices(240) == list(range(0, 240, 10))
    assert vf.sample_frame_indices(5000) == list(range(0, 240, 10))  # only the first 240
    assert vf.sample_frame_indices(100) == [0, 4, 8, 12, 16, 20, 25, 29, 33, 37, 41, 45,
                                            50, 54, 58, 62, 66, 70, 75, 79, 83, 87, 91, 95]
    assert vf.sample_frame_indices(24) == list(range(24))
    assert vf.sample_frame_indices(12) == [i // 2 for i in range(24)]  # repeats frames
    assert vf.sample_frame_indices(1) == [0] * 24
    assert vf.sample_frame_indices(30, num_samples=3, window=30) == [0, 10, 20]
    with pytest.raises(ValueError, match="at least one frame"):
        vf.sample_frame_indices(0)


# ------------------------------------------------------------------------ the CNN

@pytest.fixture(scope="module")
def extractor():
    return vf.GoogLeNetFeatures(seed=0)


@pytest.fixture(scope="module")
def frames():
    return np.random.default_rng(0).integers(0, 256, (2, 224, 224, 3), dtype=np.uint8)


@pytest.fixture(scope="module")
def features(extractor, frames):
    return extractor(frames)


def test_googlenet_topology(extractor):
    m = extractor.model
    # 57 convolutions; 5,973,552 parameters = the 6,998,552 of Inception v1 minus the
    # 1024x1000 + 1000 classifier (auxiliary classifiers are training-only).
    assert len(googlenet.conv_layers(m)) == 57
    assert m.count_params() == 5_973_552
    shape = lambda name: tuple(m.get_layer(googlenet.keras_name(name)).output.shape[1:])
    assert shape("conv1/7x7_s2") == (112, 112, 64)
    assert shape("pool1/3x3_s2") == (56, 56, 64)
    assert shape("pool2/3x3_s2") == (28, 28, 192)
    assert shape("inception_3b/output") == (28, 28, 480)
    assert shape("pool3/3x3_s2") == (14, 14, 480)
    assert shape("inception_4e/output") == (14, 14, 832)
    assert shape("pool4/3x3_s2") == (7, 7, 832)
    assert shape("inception_5b/output") == (7, 7, 1024)
    assert shape("pool5/7x7_s1") == (1, 1, 1024)


def test_inception_concat_order_is_caffe(extractor):
    # Caffe concatenates 1x1 | 3x3 | 5x5 | pool_proj; Caffe weights of the next layer
    # assume that channel order, which shapes alone would not reveal.
    m = extractor.model
    for module, (n1, r3, n3, r5, n5, pp) in googlenet.INCEPTION.items():
        concat = m.get_layer(googlenet.keras_name(f"{module}/output"))
        sources = [t._keras_history.operation.name for t in concat.input]
        assert sources == [googlenet.keras_name(f"{module}/{b}")
                           for b in ("1x1", "3x3", "5x5", "pool_proj")]
    k = m.get_layer(googlenet.keras_name("inception_4a/3x3_reduce")).kernel
    assert tuple(k.shape) == (1, 1, 480, 96)


def test_features_shape_and_determinism(extractor, frames, features):
    assert features.shape == (2, 1024) and features.dtype == np.float32
    assert np.all(np.isfinite(features)) and np.any(features > 0)
    assert not np.allclose(features[0], features[1])  # different frames differ
    np.testing.assert_array_equal(extractor(frames), features)
    # Batch-independent up to float32 round-off (oneDNN picks kernels per batch size).
    np.testing.assert_allclose(extractor(frames[:1]), features[:1], rtol=1e-5, atol=1e-6)
    # Same seed -> same random weights -> same features; another seed differs.
    np.testing.assert_allclose(vf.GoogLeNetFeatures(seed=0)(frames), features, rtol=1e-6)
    assert not np.allclose(vf.GoogLeNetFeatures(seed=1)(frames), features)


def _caffe_maxpool(x, k=3, s=2):
    """Caffe's MAX pooling, pad 0, output size ceil((H - k) / s) + 1 (windows clipped)."""
    h, w = x.shape[:2]
    oh, ow = -(-(h - k) // s) + 1, -(-(w - k) // s) + 1
    out = np.empty((oh, ow) + x.shape[2:], x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[i, j] = x[i * s:min(i * s + k, h), j * s:min(j * s + k, w)].max(axis=(0, 1))
    return out


def test_pooling_matches_caffe_ceil_mode(extractor):
    x = np.random.default_rng(1).standard_normal((112, 112, 2)).astype("float32")
    pool = extractor.model.get_layer(googlenet.keras_name("pool1/3x3_s2"))
    got = np.asarray(pool(x[None]))[0]
    np.testing.assert_array_equal(got, _caffe_maxpool(x))


def test_conv1_padding_matches_caffe(extractor, frames):
    # Caffe: BGR - mean, zero pad 3 on every side, 7x7 stride 2, ReLU. Checked at the
    # corners, where asymmetric "same" padding would differ.
    import keras
    m = extractor.model
    conv1 = m.get_layer(googlenet.keras_name("conv1/7x7_s2"))
    sub = keras.Model(m.input, conv1.output)
    got = np.asarray(sub(frames[:1].astype("float32")))[0]
    w, b = conv1.get_weights()
    x = frames[0].astype("float64")[..., ::-1] - np.array(googlenet.CAFFE_BGR_MEAN)
    x = np.pad(x, ((3, 3), (3, 3), (0, 0)))
    for i, j in [(0, 0), (111, 111), (0, 111), (5, 7)]:
        want = np.maximum(np.einsum("hwc,hwck->k", x[2 * i:2 * i + 7, 2 * j:2 * j + 7], w) + b, 0)
        np.testing.assert_allclose(got[i, j], want, rtol=1e-4, atol=1e-3)


def test_lrn_is_caffe_lrn():
    import tensorflow as tf
    _, lrn = googlenet._layers()
    x = np.random.default_rng(2).standard_normal((1, 3, 3, 12)).astype("float32") * 30
    got = np.asarray(lrn()(x))
    # Caffe divides alpha by local_size; TF's alpha multiplies the plain sum.
    want = tf.nn.local_response_normalization(x, depth_radius=2, bias=1.0,
                                              alpha=1e-4 / 5, beta=0.75).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert not np.allclose(got, x)


# ------------------------------------------------------------------------ weights

def test_keras_weights_round_trip(tmp_path, extractor, frames, features):
    path = str(tmp_path / "googlenet.weights.h5")
    extractor.save_weights(path)
    other = vf.GoogLeNetFeatures(seed=7)
    assert not np.allclose(other(frames), features)
    other.load_weights(path)
    np.testing.assert_allclose(other(frames), features, rtol=1e-6)
    assert other.weights_source == os.path.abspath(path)
    with pytest.raises(ValueError, match=r"must end in '\.weights\.h5'"):
        extractor.save_weights(str(tmp_path / "x.h5"))


def _caffe_export(model):
    """The model's weights as pycaffe would hold them: Caffe names, [out, in, kh, kw]."""
    out = {}
    for name, layer in googlenet.conv_layers(model).items():
        k, b = layer.get_weights()
        out[f"{name}/0"] = k.transpose(3, 2, 0, 1)
        out[f"{name}/1"] = b
    return out


def test_caffe_npz_conversion(tmp_path, extractor, frames, features):
    arrays = _caffe_export(extractor.model)
    # The classifier layers of the BVLC model are present in an export and ignored.
    arrays["loss3/classifier/0"] = np.zeros((1000, 1024), "float32")
    arrays["loss3/classifier/1"] = np.zeros((1000,), "float32")
    path = str(tmp_path / "bvlc_googlenet.npz")
    np.savez(path, **arrays)
    other = vf.GoogLeNetFeatures(seed=3, weights=path)
    np.testing.assert_allclose(other(frames), features, rtol=1e-5, atol=1e-6)


def test_caffe_tensorflow_npy_conversion(tmp_path, extractor, frames, features):
    # caffe-tensorflow: {"conv1_7x7_s2": {"weights": [kh, kw, in, out], "biases": ..}}.
    nested = {}
    for name, layer in googlenet.conv_layers(extractor.model).items():
        k, b = layer.get_weights()
        nested[name.replace("/", "_")] = {"weights": k, "biases": b}
    path = str(tmp_path / "googlenet.npy")
    np.save(path, nested, allow_pickle=True)
    other = vf.GoogLeNetFeatures(seed=4)
    with pytest.raises(ValueError, match="allow_pickle=True"):
        other.load_weights(path)
    other.load_weights(path, allow_pickle=True)
    np.testing.assert_allclose(other(frames), features, rtol=1e-5, atol=1e-6)


def test_conversion_errors(extractor):
    arrays = _caffe_export(extractor.model)
    partial = {k: v for k, v in arrays.items() if not k.startswith("inception_5b/")}
    with pytest.raises(ValueError, match="6 GoogLeNet layers have no weights"):
        googlenet.caffe_arrays_to_keras(extractor.model, partial)
    extra = dict(arrays, **{"fc6/0": np.zeros((4, 4)), "fc6/1": np.zeros(4)})
    with pytest.raises(ValueError, match=r"not in the BVLC GoogLeNet.*fc6"):
        googlenet.caffe_arrays_to_keras(extractor.model, extra)
    bad = dict(arrays, **{"conv1/7x7_s2/0": np.zeros((64, 3, 5, 5), "float32")})
    with pytest.raises(ValueError, match=r"mine\.npz: layer conv1/7x7_s2"):
        googlenet.caffe_arrays_to_keras(extractor.model, bad, source="mine.npz")


# -------------------------------------------------------------------------- store

def test_feature_store_round_trip_and_atomic_files(tmp_path):
    root = str(tmp_path / "feats")
    store = vf.FeatureStore.create(root, weights="/w/bvlc.npz")
    a = np.arange(24 * 1024, dtype="float32").reshape(24, 1024)
    store.put("vid1", a, info={"frames_read": 240})
    store.put("vid2", a + 1, flush=False)
    # vid2 is on disk but not yet in the index: a reopened store does not count it.
    assert vf.FeatureStore.open(root).clip_ids() == ["vid1"]
    store.flush()
    again = vf.FeatureStore.open(root)
    assert again.clip_ids() == ["vid1", "vid2"] and len(again) == 2
    np.testing.assert_array_equal(again.get("vid1"), a)
    assert again.get_batch(["vid2", "vid1"]).shape == (2, 24, 1024)
    assert again.info("vid1") == {"frames_read": 240}
    assert not again.synthetic and again.pretrained
    assert not [f for f in os.listdir(root) if ".tmp" in f]
    with open(os.path.join(root, vf.INDEX_FILE)) as f:
        index = json.load(f)
    assert index["synthetic"] is False and index["dim"] == 1024 and index["num_frames"] == 24
    with pytest.raises(ValueError, match=r"clip vid3: features \(24, 512\)"):
        store.put("vid3", np.zeros((24, 512)))
    with pytest.raises(ValueError, match="bad clip id"):
        store.put("../evil", a)
    with pytest.raises(KeyError, match="vid9"):
        store.get("vid9")
    with pytest.raises(ValueError, match="existing store has"):
        vf.FeatureStore.create(root, dim=2048)


def test_extract_features_samples_the_right_frames(tmp_path):
    # Frame t is a constant image of value t; the fake model returns each frame's mean,
    # so the stored features spell out which frames were sampled.
    def fake_model(x):
        assert x.shape[1:] == (224, 224, 3)
        return np.repeat(x.mean(axis=(1, 2, 3))[:, None], 8, axis=1)
    fake_model.weights_source = "fake"

    def video(n):
        return [np.full((16, 20, 3), t % 256, np.uint8) for t in range(n)]

    clips = [("vid1", video(300)), ("vid2", iter(video(100))), ("vid3", np.stack(video(12)))]
    store = vf.FeatureStore.create(str(tmp_path / "s"), feature="fake", dim=8)
    assert vf.extract_features(iter(clips), fake_model, store) == 3
    np.testing.assert_allclose(store.get("vid1")[:, 0], range(0, 240, 10), atol=1e-3)
    np.testing.assert_allclose(store.get("vid2")[:, 0], vf.sample_frame_indices(100), atol=1e-3)
    np.testing.assert_allclose(store.get("vid3")[:, 0], [i // 2 for i in range(24)], atol=1e-3)
    assert store.info("vid1")["frames_read"] == 240 and store.info("vid2")["frames_read"] == 100
    # Resuming skips stored clips; a model with other weights may not add to the store.
    assert vf.extract_features(iter(clips), fake_model, store) == 0
    other = lambda x: fake_model(x)
    other.weights_source = "other"
    with pytest.raises(ValueError, match="store holds features from weights 'fake'"):
        vf.extract_features(iter([("vid4", video(5))]), other, store)


def test_extract_features_with_googlenet(tmp_path, extractor):
    # The real extractor on a short generated video (24 frames of 32x32).
    rng = np.random.default_rng(5)
    video = rng.integers(0, 256, (24, 32, 32, 3), dtype=np.uint8)
    store = vf.FeatureStore.create(str(tmp_path / "g"))
    with pytest.warns(vf.SyntheticFeaturesWarning, match="randomly initialised"):
        vf.extract_features([("vid1", video)], extractor, store)
        store = vf.FeatureStore.open(store.root)
    assert store.get("vid1").shape == (24, 1024)
    assert store.metadata["weights"] == vf.RANDOM_INIT and not store.pretrained
    np.testing.assert_allclose(store.get("vid1")[:2], extractor(video[:2]), rtol=1e-5, atol=1e-6)


# ---------------------------------------------------------------------- synthetic

def test_synthetic_features_are_deterministic_and_marked(tmp_path):
    a = vf.synthetic_clip_features("vid1")
    assert a.shape == (24, 1024) and a.dtype == np.float32 and (a >= 0).all()
    np.testing.assert_array_equal(a, vf.synthetic_clip_features("vid1"))
    assert not np.allclose(a, vf.synthetic_clip_features("vid2"))
    assert not np.allclose(a, vf.synthetic_clip_features("vid1", seed=1))

    root = str(tmp_path / "syn")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        vf.write_synthetic_store(root, ["vid1", "vid2"])
    with open(os.path.join(root, vf.INDEX_FILE)) as f:
        index = json.load(f)
    assert index["synthetic"] is True and "NOT results" in index["WARNING"]
    with pytest.warns(vf.SyntheticFeaturesWarning, match="SYNTHETIC"):
        store = vf.FeatureStore.open(root)
    assert store.synthetic and not store.pretrained and store.provenance()["synthetic"]
    np.testing.assert_array_equal(store.get("vid1"), a)
    with pytest.raises(ValueError, match="synthetic store cannot receive real features"):
        vf.extract_features([], lambda x: x, store)

    with pytest.warns(vf.SyntheticFeaturesWarning):
        mem = vf.SyntheticFeatures()
    np.testing.assert_array_equal(mem.get_batch(["vid1"])[0], a)


def test_video_decoding_needs_a_decoder(tmp_path):
    try:
        import cv2  # noqa: F401
        pytest.skip("OpenCV is installed")
    except ImportError:
        pass
    try:
        import imageio  # noqa: F401
        pytest.skip("imageio is installed")
    except ImportError:
        pass
    path = tmp_path / "clip.avi"
    path.write_bytes(b"\0")
    with pytest.raises(ImportError, match="opencv-python-headless"):
        vf.read_video_frames(str(path))

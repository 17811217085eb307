"""The run directory (``model_dir``): configs, checkpoints, ``results.json``.

Everything a run needs to be rebuilt lives in its directory: ``model_config.json``
(the architecture), ``train_config.json`` (the Trainer's), ``run_config.json`` and
``flags.txt`` (the resolved settings of the CLI that made it), the Trainer's
checkpoints (``ckpt/``), ``provenance.json`` (the commit, time and machine load of
each start: :mod:`acvi_tf.utils.provenance`) and ``results.json``. These modules read
and write them; they know no flags and raise ordinary exceptions
(:class:`~acvi_tf.errors.ConfigError` names the setting at fault, so a CLI can report
it as a flag error):

- :mod:`~acvi_tf.run.directory`: the lock, the provenance segments, the run and model
  configs, the vocabulary files;
- :mod:`~acvi_tf.run.results`: ``results.json`` and the run's TensorBoard HParams row;
- :mod:`~acvi_tf.run.restore`: the checkpoint to evaluate, restoring it into a model,
  and warm-starting a new run from a trained one.
"""

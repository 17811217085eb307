"""TensorFlow as the test processes run it: the pytest workers (conftest) and the CLI runs
tests/cli.py forks. Both settings cut what it costs to trace and first run a
``tf.function``, which is most of what the tests spend; neither changes a result. A CLI
run with ``ACVI_TEST_AS_RUN=1`` keeps TensorFlow's defaults, as users run it.

* Grappler off: its rewrite of each freshly traced function costs 1-2 CPU-seconds at the
  function's first call (a train step of the tiny test models: 2.2 s with it, 0.8 s
  without), more than the few steps the tests then run, and almost every test traces new
  functions. A graph optimiser keeps the graph's semantics.
* No Python stack recorded for each graph op. TensorFlow stores the creating stack of
  every op it traces (for the "defined at" lines of a runtime error) and converts them all
  into the function's debug info when the function is first run. A tiny train step traced
  and run six times (ACVI-free variational attention, translation): 12.9 -> 10.4 CPU-s
  (trace -11%, first call -33%). Errors still name the op; they lose only its stack.
"""

import inspect


def apply():
    import tensorflow as tf
    from tensorflow.python.framework import ops

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    create = ops._create_c_op
    if "extract_traceback" not in inspect.signature(create).parameters:
        return  # another TensorFlow: its op creation stays as it is
    if getattr(create, "without_traceback", False):
        return

    def create_without_traceback(*args, **kwargs):
        kwargs["extract_traceback"] = False
        return create(*args, **kwargs)
    create_without_traceback.without_traceback = True
    ops._create_c_op = create_without_traceback

"""The machine a benchmark runs on: what it is (CPUs, memory, versions, load) and its
float32 matmul peak, the denominator of ``fraction_of_peak``."""

import datetime
import os
import platform
import statistics
from time import perf_counter as _now

from acvi_tf.utils.provenance import cpu_description, tf_settings
from benchmarks.load import load_average


def machine_info():
    import keras
    import tensorflow as tf
    mem_gb = None
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        mem_gb = round(kb / 2 ** 20, 1)
    except (OSError, StopIteration):
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": affinity,
        "cpu_model": cpu_description(),
        "memory_gb": mem_gb,
        "gpus": len(tf.config.list_physical_devices("GPU")),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "onednn": tf_settings()["onednn"],
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_average_at_start": load_average(),
    }


def matmul_peak(n, reps):
    """GFLOP/s of an n x n float32 matmul under tf.function (best and median of reps)."""
    import tensorflow as tf
    a = tf.random.stateless_normal([n, n], seed=[1, 2])
    b = tf.random.stateless_normal([n, n], seed=[3, 4])
    fn = tf.function(lambda a, b: tf.reduce_sum(tf.linalg.matmul(a, b)))
    fn(a, b).numpy()
    times = []
    for _ in range(reps):
        t0 = _now()
        fn(a, b).numpy()
        times.append(_now() - t0)
    flops = 2 * n ** 3
    return {"n": n, "reps": reps, "ms_median": 1e3 * statistics.median(times),
            "gflops_best": flops / min(times) / 1e9,
            "gflops_median": flops / statistics.median(times) / 1e9}

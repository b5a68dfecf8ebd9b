"""lm-eval's own CLI, with its vLLM engine start and its loglikelihood phase timed from outside.

    LMEVAL_TIMES=times.json python timed_lmeval.py run --model vllm ...

lm-eval itself is unchanged: `VLLM.__init__` and `VLLM.loglikelihood` are wrapped with a clock, and the two
durations are written to $LMEVAL_TIMES as JSON when the process ends. The loglikelihood phase includes lm-eval's
tokenization of the requests, as offline-eval's phase includes its request building.
"""

import atexit
import json
import os
import time

from lm_eval.__main__ import cli_evaluate
from lm_eval.models.vllm_causallms import VLLM

times: dict[str, float] = {}


def timed(name, fn):  # type: ignore[no-untyped-def]
    def wrapper(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return fn(self, *args, **kwargs)
        finally:
            times[name] = times.get(name, 0.0) + time.perf_counter() - t0
            if name == "loglikelihood" and args:
                times["requests"] = times.get("requests", 0) + len(args[0])

    return wrapper


def write() -> None:
    with open(os.environ["LMEVAL_TIMES"], "w") as fh:
        json.dump(times, fh)


VLLM.__init__ = timed("load", VLLM.__init__)
VLLM.loglikelihood = timed("loglikelihood", VLLM.loglikelihood)
atexit.register(write)

if __name__ == "__main__":
    cli_evaluate()

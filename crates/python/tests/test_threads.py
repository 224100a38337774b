"""Threads calling one loaded method concurrently each get their own correct
results (the GIL is released while a call waits for the GPU)."""

import threading

import numpy as np

from conftest import FIXTURES, call_arrays

N_THREADS = 4
CALLS_PER_THREAD = 5


def test_threads_share_one_method(rt):
    method = rt.load_program(FIXTURES / "transformer_block" / "model.pte").load_method()
    rng = np.random.default_rng(7)
    (golden_in,) = call_arrays("transformer_block", 0, "inputs")
    (golden_out,) = call_arrays("transformer_block", 0, "outputs")
    # Distinct inputs per thread and call; the serial results are the reference.
    cases = [
        [rng.standard_normal(golden_in.shape).astype(np.float32) for _ in range(CALLS_PER_THREAD)]
        for _ in range(N_THREADS)
    ]
    cases[0][0] = golden_in
    want = [[method.execute([x])[0] for x in xs] for xs in cases]
    np.testing.assert_allclose(want[0][0], golden_out, rtol=2e-4, atol=2e-4)
    got = [[None] * CALLS_PER_THREAD for _ in range(N_THREADS)]
    errors = []
    barrier = threading.Barrier(N_THREADS)

    def work(t):
        try:
            barrier.wait()
            for k, x in enumerate(cases[t]):
                got[t][k] = method.execute([x])[0]
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(N_THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors, errors
    for t in range(N_THREADS):
        for k in range(CALLS_PER_THREAD):
            np.testing.assert_array_equal(got[t][k], want[t][k], err_msg=f"thread {t} call {k}")

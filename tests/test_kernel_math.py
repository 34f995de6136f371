"""The small device helpers every kernel relies on: the index mask and the inline sincos."""

import numpy as np
import torch
import warp as wp
from gpuparam.kernels.cartpole import sincos
from gpuparam.kernels.index import thread_index


@wp.kernel
def _sincos_kernel(x: wp.array(dtype=float), s_out: wp.array(dtype=float),
                   c_out: wp.array(dtype=float)):
    i = thread_index(wp.tid())
    s, c = sincos(x[i])
    s_out[i] = s
    c_out[i] = c


@wp.kernel
def _index_kernel(out: wp.array(dtype=wp.int32)):
    i = thread_index(wp.tid())
    out[i] = i


def _run_sincos(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    xs = wp.array(x.astype(np.float32), dtype=float, device="cpu")
    s = wp.zeros_like(xs)
    c = wp.zeros_like(xs)
    wp.launch(_sincos_kernel, dim=len(x), inputs=[xs, s, c], device="cpu")
    return s.numpy(), c.numpy()


def test_sincos_matches_float64_inside_and_outside_the_polynomial_range():
    # the polynomial covers |x| <= pi/4 (boundary included); beyond it the library functions
    x = np.concatenate([
        np.linspace(-np.pi / 4, np.pi / 4, 20001),
        np.array([0.0, -0.0, 1e-30, 0.7853981, 0.7853983, -0.7853983]),
        np.linspace(-100.0, 100.0, 20001),
    ]).astype(np.float32)
    s, c = _run_sincos(x)
    xd = x.astype(np.float64)
    # float32 results: within 2e-7 of the exact values (about 1 ulp near 1)
    np.testing.assert_allclose(s, np.sin(xd), rtol=0, atol=2e-7)
    np.testing.assert_allclose(c, np.cos(xd), rtol=0, atol=2e-7)
    small = np.abs(xd) < 1e-3  # odd function: sin keeps the sign and relative precision
    np.testing.assert_allclose(s[small], np.sin(xd[small]), rtol=2e-7, atol=0)


def test_sincos_propagates_non_finite_input():
    s, c = _run_sincos(np.array([np.nan, np.inf, -np.inf], dtype=np.float32))
    assert np.isnan(s).all() and np.isnan(c).all()


def test_thread_index_is_the_thread_id():
    out = wp.zeros(1000, dtype=wp.int32, device="cpu")
    wp.launch(_index_kernel, dim=1000, inputs=[out], device="cpu")
    assert torch.equal(wp.to_torch(out), torch.arange(1000, dtype=torch.int32))


def test_draw_kernels_are_built_without_fp_contraction():
    """CPU = GPU draws bit for bit needs no FMA contraction on the GPU (NVRTC fuses
    ``a + (b - a) * u``, the CPU rounds twice): every module whose kernels draw says so."""
    import warp as wp
    from gpuparam.kernels import cartpole, locomotion, pendulum, randomize

    for module in (cartpole, locomotion, pendulum, randomize):
        assert wp.get_module_options(module)["fuse_fp"] is False, module.__name__

"""Device code only: Warp functions and kernels, one module per env plus shared ones.

Nothing here holds Python state or imports torch; ``gpuparam`` launches these kernels.
"""

atol = 1e-3

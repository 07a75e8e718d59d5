// The offline copy's Resample: the next precomputed draw.
seed.value = (seed.value + 1) % n;

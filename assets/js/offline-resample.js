// The offline copy's Resample: the next precomputed draw.
/* global seed, n */
seed.value = (seed.value + 1) % n;

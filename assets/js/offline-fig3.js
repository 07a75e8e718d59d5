// The offline copy's Reset to Fig. 3: the reference setting's positions, scaling on, seed 2288.
dk.value = positions[0]; temp.value = positions[1]; toggle.active = true; seed.value = 0;

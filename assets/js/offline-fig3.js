// The offline copy's Reset to the reference draw: the reference setting's positions, the 1/sqrt(d_k) rule,
// seed 2288, the one-draw tab (as on the served page).
/* global dk, temp, rule, seed, tabs, positions */
dk.value = positions[0]; temp.value = positions[1]; rule.active = positions[2]; seed.value = 0;
tabs.active = 0;

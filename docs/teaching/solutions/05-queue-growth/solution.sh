#!/bin/sh
# Exercise 5: the runs behind results/. broken/ keeps only the 128KB runs, so nothing can be
# fitted: the checker must fail `runs-present` and `growth`.
set -eu
ofan-lab compare --name "${LAB:-lab}" --lb rsq,ofan --sizes 32KB,128KB,512KB --repeat 1 --seed 5 --out "${OUT:-ex5}"
